package verify

import (
	"errors"
	"testing"

	"github.com/pinfs/pinfs/verify/b3"
)

// TestHeaderOfAnotherVersionIsForeign: an intact header of another format
// version is not read as this one's.
func TestHeaderOfAnotherVersionIsForeign(t *testing.T) {
	h := &header{table: "sha256:ab", members: 1, bytes: 2, dirs: 1, sorted: true}
	h.lens[secWalk] = walkSize
	h.sums[secWalk] = []b3.Sum{{1}}
	b := h.encode()
	got, err := decodeHeader(b)
	if err != nil || got.members != 1 || got.table != h.table || got.sums[secWalk][0] != h.sums[secWalk][0] {
		t.Fatalf("decode = %+v, %v", got, err)
	}
	le.PutUint32(b[len(indexMagic):], IndexVersion+1)
	sum := b3.Of(b[:len(b)-32])
	copy(b[len(b)-32:], sum[:])
	if _, err := decodeHeader(b); !errors.Is(err, errForeign) {
		t.Fatalf("version %d: %v, want errForeign", IndexVersion+1, err)
	}
	b[len(indexMagic)+5] ^= 1 // now the digest does not match either
	if _, err := decodeHeader(b); err == nil || errors.Is(err, errForeign) {
		t.Fatalf("changed header: %v", err)
	}
}
