package b3_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"lukechampine.com/blake3"
	"lukechampine.com/blake3/bao"

	"github.com/pinfs/pinfs/verify/b3"
)

// Of and Hasher walk the BLAKE3 tree themselves; these tests hold them to
// lukechampine.com/blake3's Sum256, which pinfs used before, on sizes
// around every boundary of the walk: a chunk, 16 chunks (one kernel call),
// a group, a 1 MiB subtree.
func refSizes() []int {
	var ns []int
	for _, base := range []int{0, 1024, 16 << 10, b3.GroupSize, 1 << 20, 2 << 20, 3 << 20, 4 << 20} {
		for _, d := range []int{-1, 0, 1, 1000} {
			if n := base + d; n >= 0 {
				ns = append(ns, n)
			}
		}
	}
	return append(ns, 5<<20+3*b3.GroupSize+17, 7<<20+1<<15)
}

func TestOfMatchesReference(t *testing.T) {
	for _, n := range refSizes() {
		data := randomBytes(n, uint64(n)+9)
		want := b3.Sum(blake3.Sum256(data))
		if got := b3.Of(data); got != want {
			t.Errorf("%d bytes: Of = %v, want %v", n, got, want)
		}
		// Whole MiB writes take the Hasher's direct path.
		h := b3.NewHasher()
		for rest := data; len(rest) > 0; {
			k := min(len(rest), 1<<20)
			h.Write(rest[:k])
			rest = rest[k:]
		}
		if got := h.Sum(); got != want {
			t.Errorf("%d bytes in MiB writes: Hasher = %v, want %v", n, got, want)
		}
		if got := h.Sum(); got != want {
			t.Errorf("%d bytes: a second Sum = %v, want %v", n, got, want)
		}
	}
}

// FuzzOf checks Of and the Hasher, written in pieces of any size, against
// lukechampine.com/blake3's Sum256.
func FuzzOf(f *testing.F) {
	f.Add(uint32(5<<20+3), uint32(1<<20))
	f.Add(uint32(16<<10+1), uint32(1000))
	f.Fuzz(func(t *testing.T, size, piece uint32) {
		data := randomBytes(int(size%(9<<20)), uint64(size))
		want := b3.Sum(blake3.Sum256(data))
		if got := b3.Of(data); got != want {
			t.Fatalf("%d bytes: Of = %v, want %v", len(data), got, want)
		}
		h := b3.NewHasher()
		for rest, k := data, max(1, int(piece%(3<<20))); len(rest) > 0; {
			k = min(k, len(rest))
			h.Write(rest[:k])
			rest = rest[k:]
		}
		if got := h.Sum(); got != want {
			t.Fatalf("%d bytes in writes of %d: Hasher = %v, want %v", len(data), piece, got, want)
		}
	})
}

// FuzzVerify checks that Verify never panics, accepts every aligned range
// of a member under its outboard, refuses it with a byte changed, and
// judges a damaged outboard as bao.VerifyChunk does.
func FuzzVerify(f *testing.F) {
	f.Add(uint32(3<<20+5), uint16(1), uint16(4), uint32(7), uint32(0))
	f.Add(uint32(b3.GroupSize), uint16(0), uint16(1), uint32(7), uint32(0))
	f.Add(uint32(1<<20+1), uint16(16), uint16(1), uint32(0), uint32(70))
	f.Fuzz(func(t *testing.T, size uint32, group, groups uint16, flipData, flipOb uint32) {
		n := int(size % (6 << 20))
		if n == 0 {
			return
		}
		data := randomBytes(n, uint64(size))
		d, ob, err := b3.Encode(bytes.NewReader(data), int64(n))
		if err != nil {
			t.Fatal(err)
		}
		off := int(group) * b3.GroupSize % n / b3.GroupSize * b3.GroupSize
		end := min(n, off+max(1, int(groups%32))*b3.GroupSize)
		if err := b3.Verify(d, ob, int64(n), int64(off), data[off:end]); err != nil {
			t.Fatalf("size %d, range %d+%d: authentic bytes refused: %v", n, off, end-off, err)
		}
		bad := bytes.Clone(data[off:end])
		bad[int(flipData)%len(bad)] ^= byte(flipData>>24 | 1)
		if b3.Verify(d, ob, int64(n), int64(off), bad) == nil {
			t.Fatalf("size %d, range %d+%d: a changed byte verified", n, off, end-off)
		}
		// A damaged outboard: Verify agrees with what it did before it
		// walked the outboard itself (length prefix, then bao).
		ob[int(flipOb)%len(ob)] ^= byte(flipOb>>24 | 1)
		got := b3.Verify(d, ob, int64(n), int64(off), data[off:end]) == nil
		want := binary.LittleEndian.Uint64(ob) == uint64(n) &&
			bao.VerifyChunk(data[off:end], ob, b3.GroupLog, uint64(off), d)
		if got != want {
			t.Fatalf("size %d, range %d+%d, outboard byte %d changed: Verify %v, bao %v", n, off, end-off, int(flipOb)%len(ob), got, want)
		}
	})
}
