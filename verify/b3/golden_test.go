package b3_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfs/pinfs/verify/b3"
)

var update = flag.Bool("update", false, "rewrite testdata/outboard.bao (never for a store already written: its outboards must keep verifying)")

// goldenSize is the size of the golden member: two 1 MiB blocks, three
// groups and a partial chunk, so that the outboard has a ragged right edge.
const goldenSize = 2<<20 + 3*b3.GroupSize + 1000

// goldenDigest is the member's digest, as b3sum 1.2.0 prints it.
const goldenDigest = "blake3:c5a75d9306d9394babab6faaf604fdbf142d07cc1472cd3abb61bd5312c44e24"

// TestGoldenOutboard pins the outboard format: stores written by earlier
// versions hold outboards made by lukechampine.com/blake3/bao (group log 6,
// 8-byte length prefix, pre-order parents); Encode must still make them
// byte for byte, and Verify must accept every block of the member under
// the stored one and refuse a flipped byte.
func TestGoldenOutboard(t *testing.T) {
	data := vectorInput(goldenSize)
	file := filepath.Join("testdata", "outboard.bao")
	sum, ob, err := b3.Encode(bytes.NewReader(data), goldenSize)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(file, ob, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if sum.String() != goldenDigest {
		t.Fatalf("Encode digest %s, want %s", sum, goldenDigest)
	}
	if !bytes.Equal(ob, golden) {
		t.Fatalf("Encode made a %d-byte outboard that differs from the golden one (%d bytes)", len(ob), len(golden))
	}
	want, _ := b3.Parse(goldenDigest)
	for off := 0; off < goldenSize; off += 1 << 20 {
		end := min(off+1<<20, goldenSize)
		if err := b3.Verify(want, golden, goldenSize, int64(off), data[off:end]); err != nil {
			t.Errorf("block at %d: %v", off, err)
		}
		bad := bytes.Clone(data[off:end])
		bad[len(bad)-1] ^= 1
		if err := b3.Verify(want, golden, goldenSize, int64(off), bad); err == nil {
			t.Errorf("block at %d: a flipped byte verified", off)
		}
	}
}
