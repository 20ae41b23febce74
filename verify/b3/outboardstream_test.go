package b3_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/pinfs/pinfs/verify/b3"
)

// streamCheck writes ob to an OutboardStream of d in pieces of chunk
// bytes and returns its verdict and how much it verified.
func streamCheck(d b3.Sum, ob []byte, chunk int) (error, int64) {
	s := b3.NewOutboardStream(d)
	for p := ob; len(p) > 0; {
		k := min(chunk, len(p))
		n, err := s.Write(p[:k])
		if err != nil {
			if n > k {
				return errors.New("Write consumed more than it was given"), s.Verified()
			}
			return err, s.Verified()
		}
		p = p[k:]
	}
	return s.Close(), s.Verified()
}

// wholeCheck is CheckOutboard with the size from ob's header, as the
// origin checked a whole outboard (tier.Check).
func wholeCheck(d b3.Sum, ob []byte) error {
	if len(ob) < 8 || binary.LittleEndian.Uint64(ob) > 1<<62 {
		return errors.New("no header")
	}
	return b3.CheckOutboard(d, int64(binary.LittleEndian.Uint64(ob)), ob)
}

var chunks = []int{1, 7, 64, 100, 4096, 1 << 30}

func TestOutboardStreamAcceptsEncode(t *testing.T) {
	for _, n := range []int{0, 1, b3.GroupSize - 1, b3.GroupSize, b3.GroupSize + 1, 2 * b3.GroupSize,
		3*b3.GroupSize + 5, 11*b3.GroupSize + 1, 5 << 20} {
		d, ob := encoded(t, n, uint64(n))
		for _, c := range chunks {
			err, v := streamCheck(d, ob, c)
			if err != nil || v != int64(len(ob)) {
				t.Errorf("size %d in pieces of %d: %v, %d of %d bytes verified", n, c, err, v, len(ob))
			}
		}
	}
}

// TestOutboardStreamDetectsEveryByte flips each byte of outboards of
// trees of several levels, lopsided ones included: the stream refuses
// every one, as CheckOutboard does, and never counts the flipped byte
// as verified.
func TestOutboardStreamDetectsEveryByte(t *testing.T) {
	for _, n := range []int{7*b3.GroupSize + 123, 11*b3.GroupSize + 1, 16 * b3.GroupSize} {
		d, ob := encoded(t, n, uint64(n))
		for i := range ob {
			for _, bit := range []byte{0x01, 0x80} {
				bad := bytes.Clone(ob)
				bad[i] ^= bit
				for _, c := range []int{1, 64, 1 << 30} {
					err, v := streamCheck(d, bad, c)
					if i < 8 {
						// A header may claim another size of the same
						// tree: the stream agrees with CheckOutboard.
						if (err == nil) != (wholeCheck(d, bad) == nil) {
							t.Fatalf("size %d, byte %d ^ %#x: stream %v, CheckOutboard %v", n, i, bit, err, wholeCheck(d, bad))
						}
						continue
					}
					if err == nil {
						t.Fatalf("size %d, byte %d ^ %#x in pieces of %d: accepted", n, i, bit, c)
					}
					if i >= 8 && !errors.Is(err, b3.ErrMismatch) {
						t.Fatalf("size %d, byte %d ^ %#x: %v, want ErrMismatch", n, i, bit, err)
					}
					if v > int64(i) {
						t.Fatalf("size %d, byte %d ^ %#x in pieces of %d: %d bytes verified", n, i, bit, c, v)
					}
				}
				if i >= 8 && wholeCheck(d, bad) == nil {
					t.Fatalf("size %d, byte %d ^ %#x: CheckOutboard accepts what the stream refused", n, i, bit)
				}
			}
		}
	}
}

// TestOutboardStreamDetectsSwaps swaps two parents or the two halves of
// one, as TestCheckOutboardDetectsSwaps does.
func TestOutboardStreamDetectsSwaps(t *testing.T) {
	d, ob := encoded(t, 16*b3.GroupSize, 16)
	for what, bad := range swapped(ob) {
		if err, _ := streamCheck(d, bad, 64); !errors.Is(err, b3.ErrMismatch) {
			t.Errorf("%s: %v", what, err)
		}
	}
}

func TestOutboardStreamRefusesWrongShape(t *testing.T) {
	n := 3*b3.GroupSize + 5
	d, ob := encoded(t, n, 3)
	header := func(size uint64) []byte {
		b := bytes.Clone(ob)
		binary.LittleEndian.PutUint64(b, size)
		return b
	}
	for name, bad := range map[string][]byte{
		"short":          ob[:len(ob)-1],
		"long":           append(bytes.Clone(ob), 0),
		"missing parent": ob[:len(ob)-64],
		"header only":    ob[:8],
		"half a header":  ob[:4],
		"empty":          nil,
		"header size":    header(uint64(n) + b3.GroupSize),
		"header huge":    header(1 << 63),
		"header small":   header(10),
		"header empty":   header(0)[:8],
	} {
		for _, c := range chunks {
			if err, _ := streamCheck(d, bad, c); err == nil {
				t.Errorf("%s in pieces of %d: accepted", name, c)
			}
		}
		if wholeCheck(d, bad) == nil {
			t.Errorf("%s: CheckOutboard accepts it", name)
		}
	}
}

// TestOutboardStreamHeader: Size and Len are known from the 8th byte on,
// before any node, so that a reader can refuse a length early.
func TestOutboardStreamHeader(t *testing.T) {
	n := 5 << 20
	d, ob := encoded(t, n, 5)
	s := b3.NewOutboardStream(d)
	s.Write(ob[:7])
	if _, ok := s.Len(); ok {
		t.Fatal("Len known after 7 bytes")
	}
	s.Write(ob[7:8])
	if size, ok := s.Size(); !ok || size != int64(n) {
		t.Fatalf("Size after the header: %d %v", size, ok)
	}
	if l, ok := s.Len(); !ok || l != int64(len(ob)) {
		t.Fatalf("Len after the header: %d %v, want %d", l, ok, len(ob))
	}
	if s.Verified() != 0 {
		t.Fatalf("%d bytes verified before the root node", s.Verified())
	}
	s.Write(ob[8:72])
	if s.Verified() != 72 {
		t.Fatalf("%d bytes verified after the root node, want 72", s.Verified())
	}
}

// FuzzOutboardStream: the stream and CheckOutboard agree on any bytes,
// and what the stream verified of an outboard with the good one's header
// is the good one's prefix.
func FuzzOutboardStream(f *testing.F) {
	const n = 11*b3.GroupSize + 1
	d, good := encoded(f, n, 11)
	f.Add(good, 64)
	f.Add(good[:200], 1)
	f.Add(make([]byte, 8), 3)
	f.Add(append(bytes.Clone(good[:72]), make([]byte, 64)...), 5)
	f.Fuzz(func(t *testing.T, ob []byte, chunk int) {
		chunk = max(1, chunk%5000)
		err, v := streamCheck(d, ob, chunk)
		if whole := wholeCheck(d, ob); (err == nil) != (whole == nil) {
			t.Fatalf("stream %v, CheckOutboard %v", err, whole)
		}
		if v > int64(len(ob)) {
			t.Fatalf("%d bytes verified of %d", v, len(ob))
		}
		if v > 8 && bytes.Equal(ob[:8], good[:8]) && !bytes.Equal(ob[:v], good[:v]) {
			t.Fatalf("a verified prefix of %d bytes that is not the outboard's", v)
		}
	})
}
