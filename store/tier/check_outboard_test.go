package tier

import (
	"bytes"
	"errors"
	"testing"

	"github.com/pinfs/pinfs/verify/b3"
)

// TestCheckOutboardRefusesTampering: Check of an outboard ("bao/blake3")
// accepts the outboard of the digest in its name and refuses one with a
// flipped tree byte, one of another member and one cut short, each with
// an error wrapping b3.ErrMismatch. The tampered outboard keeps its
// header (the size), so only the tree check can tell.
func TestCheckOutboardRefusesTampering(t *testing.T) {
	member := make([]byte, 5*b3.GroupSize+123)
	for i := range member {
		member[i] = byte(i * 13)
	}
	d, ob, err := b3.Encode(bytes.NewReader(member), int64(len(member)))
	if err != nil {
		t.Fatal(err)
	}
	if len(ob) <= 8 {
		t.Fatalf("an outboard of %d bytes: the member is too small to have a tree", len(ob))
	}
	if err := Check("bao/blake3", d.Hex(), ob); err != nil {
		t.Fatalf("Check(good outboard) = %v", err)
	}
	tampered := bytes.Clone(ob)
	tampered[len(tampered)-1] ^= 1
	other := bytes.Clone(member)
	other[0] ^= 1
	_, otherOB, err := b3.Encode(bytes.NewReader(other), int64(len(other)))
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"a flipped tree byte": tampered,
		"another member's":    otherOB,
		"cut short":           ob[:len(ob)-1],
		"the header alone":    ob[:8],
	} {
		if err := Check("bao/blake3", d.Hex(), bad); !errors.Is(err, b3.ErrMismatch) {
			t.Errorf("Check(outboard, %s) = %v; want an error wrapping b3.ErrMismatch", name, err)
		}
	}
}
