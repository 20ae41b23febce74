package b3_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"testing"

	"github.com/pinfs/pinfs/verify/b3"
)

// encoded returns the digest and outboard of n reproducible bytes.
func encoded(t testing.TB, n int, seed uint64) (b3.Sum, []byte) {
	t.Helper()
	d, ob, err := b3.Encode(bytes.NewReader(randomBytes(n, seed)), int64(n))
	if err != nil {
		t.Fatal(err)
	}
	return d, ob
}

func TestCheckOutboardAcceptsEncode(t *testing.T) {
	for _, n := range []int{0, 1, b3.GroupSize - 1, b3.GroupSize, b3.GroupSize + 1, 2 * b3.GroupSize,
		3*b3.GroupSize + 5, 5 << 20} {
		d, ob := encoded(t, n, uint64(n))
		if err := b3.CheckOutboard(d, int64(n), ob); err != nil {
			t.Errorf("size %d: %v", n, err)
		}
	}
}

// TestCheckOutboardDetectsEveryByte flips each byte of the outboard of a
// tree of several levels (the header and every parent).
func TestCheckOutboardDetectsEveryByte(t *testing.T) {
	n := 7*b3.GroupSize + 123 // 8 groups, 7 parents, 3 levels
	d, ob := encoded(t, n, 7)
	if len(ob) != 8+7*64 {
		t.Fatalf("outboard of %d bytes is %d long", n, len(ob))
	}
	for i := range ob {
		for _, bit := range []byte{0x01, 0x80} {
			bad := bytes.Clone(ob)
			bad[i] ^= bit
			err := b3.CheckOutboard(d, int64(n), bad)
			if err == nil {
				t.Fatalf("byte %d ^ %#x: accepted", i, bit)
			}
			if i >= 8 && !errors.Is(err, b3.ErrMismatch) {
				t.Fatalf("byte %d ^ %#x: %v, want ErrMismatch", i, bit, err)
			}
		}
	}
}

// TestCheckOutboardDetectsSwaps swaps two parents or the two halves of
// one: each pair is a valid node, but not where it sits.
func TestCheckOutboardDetectsSwaps(t *testing.T) {
	n := 16 * b3.GroupSize
	d, ob := encoded(t, n, 16)
	for what, bad := range swapped(ob) {
		if err := b3.CheckOutboard(d, int64(n), bad); !errors.Is(err, b3.ErrMismatch) {
			t.Errorf("%s: %v", what, err)
		}
	}
}

// swapped yields the outboards made of ob by swapping the two halves of
// one parent or two neighbouring parents, each named.
func swapped(ob []byte) iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		body := ob[8:]
		for i := 0; i+64 <= len(body); i += 64 {
			bad := bytes.Clone(ob)
			copy(bad[8+i:], body[i+32:i+64])
			copy(bad[8+i+32:], body[i:i+32])
			if !yield(fmt.Sprintf("halves of parent %d swapped", i/64), bad) {
				return
			}
			if j := i + 64; j+64 <= len(body) {
				bad := bytes.Clone(ob)
				copy(bad[8+i:], body[j:j+64])
				copy(bad[8+j:], body[i:i+64])
				if !yield(fmt.Sprintf("parents %d and %d swapped", i/64, j/64), bad) {
					return
				}
			}
		}
	}
}

func TestCheckOutboardRefusesWrongShape(t *testing.T) {
	n := 3*b3.GroupSize + 5
	d, ob := encoded(t, n, 3)
	header := func(size uint64) []byte {
		b := bytes.Clone(ob)
		binary.LittleEndian.PutUint64(b, size)
		return b
	}
	for name, tc := range map[string]struct {
		size int64
		ob   []byte
	}{
		"short":             {int64(n), ob[:len(ob)-1]},
		"long":              {int64(n), append(bytes.Clone(ob), 0)},
		"missing parent":    {int64(n), ob[:len(ob)-64]},
		"header only":       {int64(n), ob[:8]},
		"empty":             {int64(n), nil},
		"header size":       {int64(n), header(uint64(n) + 1)},
		"header huge":       {int64(n), header(1 << 63)},
		"size of other":     {int64(n + b3.GroupSize), ob},
		"negative size":     {-1, ob},
		"huge size":         {1<<63 - 1, ob},
		"small size":        {b3.GroupSize, ob},
		"small, long":       {10, ob},
		"small, bad header": {10, header(11)[:8]},
	} {
		err := b3.CheckOutboard(d, tc.size, tc.ob)
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCheckOutboardRefusesOtherDigest(t *testing.T) {
	for _, n := range []int{0, b3.GroupSize + 1, 5 << 20} {
		_, ob := encoded(t, n, 1)
		other, _ := encoded(t, n, 2)
		if n == 0 {
			other = b3.Of([]byte{0})
		}
		if err := b3.CheckOutboard(other, int64(n), ob); !errors.Is(err, b3.ErrMismatch) {
			t.Errorf("size %d, digest of other bytes: %v, want ErrMismatch", n, err)
		}
	}
}

// TestCheckOutboardThenVerify: an outboard that passes is one Verify can
// use; CheckOutboard does not vouch for the bytes (the doc says so).
func TestCheckOutboardThenVerify(t *testing.T) {
	n := 3*b3.GroupSize + 5
	data := randomBytes(n, 9)
	d, ob, err := b3.Encode(bytes.NewReader(data), int64(n))
	if err != nil {
		t.Fatal(err)
	}
	if err := b3.CheckOutboard(d, int64(n), ob); err != nil {
		t.Fatal(err)
	}
	if err := b3.Verify(d, ob, int64(n), 0, data); err != nil {
		t.Fatal(err)
	}
	data[b3.GroupSize] ^= 1
	if err := b3.Verify(d, ob, int64(n), 0, data); !errors.Is(err, b3.ErrMismatch) {
		t.Fatalf("Verify of changed bytes: %v", err)
	}
}

func FuzzCheckOutboard(f *testing.F) {
	_, ob := encoded(f, 3*b3.GroupSize+5, 3)
	f.Add(int64(3*b3.GroupSize+5), ob)
	f.Add(int64(0), make([]byte, 8))
	f.Add(int64(b3.GroupSize*2), make([]byte, 8+64))
	f.Fuzz(func(t *testing.T, size int64, ob []byte) {
		// A digest no outboard was made for: nothing may pass but a tree
		// without parents, whose header is all there is to check.
		d := b3.Of([]byte("a digest no outboard was made for"))
		err := b3.CheckOutboard(d, size, ob)
		if err == nil && size > b3.GroupSize {
			t.Fatalf("random outboard of %d bytes accepted", size)
		}
		if err == nil && (size == 0 || len(ob) != 8 || int64(binary.LittleEndian.Uint64(ob)) != size) {
			t.Fatalf("size %d, outboard %x accepted", size, ob)
		}
	})
}

// BenchmarkCheckOutboard checks the outboard of a 64 MiB member (1023
// parents); bytes/s is member bytes vouched for per second.
func BenchmarkCheckOutboard(b *testing.B) {
	const n = 64 << 20
	d, ob := encoded(b, n, 64)
	b.SetBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		if err := b3.CheckOutboard(d, n, ob); err != nil {
			b.Fatal(err)
		}
	}
}
