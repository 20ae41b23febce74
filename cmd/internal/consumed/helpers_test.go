package consumed

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/pinfs/pinfs/verify"
)

// trackerMembers is a small table: a member with a short last granule, one
// over several bitmap words, an empty one and a tiny one.
func trackerMembers() []verify.Member {
	return []verify.Member{
		{Path: "train/b.bin", ID: "b", Split: "train", Digest: "blake3:bb", Size: 10*Granule + 123},
		{Path: "train/a.bin", ID: "a", Split: "train", Digest: "blake3:aa", Size: 300 * Granule},
		{Path: "val/empty", ID: "e", Split: "val", Digest: "blake3:ee", Size: 0},
		{Path: "val/unread", ID: "u", Split: "val", Digest: "blake3:uu", Size: 5},
		{Path: "x/nosplit", ID: "x", Digest: "blake3:xx", Size: 3 * Granule},
	}
}

// describe returns s in a form that compares and prints well.
func describe(s *Set) string {
	keys := make([]uint32, 0, len(s.Parts))
	for i := range s.Parts {
		keys = append(keys, i)
	}
	slices.Sort(keys)
	out := fmt.Sprintf("opened=%v full=%v", s.Opened.ToArray(), s.Full.ToArray())
	for _, i := range keys {
		out += fmt.Sprintf(" part[%d]=%v", i, s.Parts[i].ToArray())
	}
	return out
}

// equal reports whether a and b hold the same members and granules.
func equal(a, b *Set) bool {
	if !a.Opened.Equals(b.Opened) || !a.Full.Equals(b.Full) || len(a.Parts) != len(b.Parts) {
		return false
	}
	for i, p := range a.Parts {
		if q := b.Parts[i]; q == nil || !p.Equals(q) {
			return false
		}
	}
	return true
}

// checkInvariants fails t if s breaks an invariant of Set.
func checkInvariants(t testing.TB, s *Set) {
	t.Helper()
	if !roaring.AndNot(s.Full, s.Opened).IsEmpty() {
		t.Errorf("Full not within Opened: %s", describe(s))
	}
	for i, p := range s.Parts {
		if s.Full.Contains(i) || !s.Opened.Contains(i) || p.IsEmpty() {
			t.Errorf("part %d: in Full, not Opened, or empty: %s", i, describe(s))
		}
	}
}

// set builds a Set from lists: opened (Full and Parts' keys are added to
// it), full, and parts as member -> granules.
func set(opened, full []uint32, parts map[uint32][]uint32) *Set {
	s := NewSet()
	s.Opened.AddMany(opened)
	s.Full.AddMany(full)
	s.Opened.Or(s.Full)
	for i, gs := range parts {
		s.Parts[i] = roaring.BitmapOf(gs...)
		s.Opened.Add(i)
	}
	return s
}

// granules returns first..last inclusive.
func granules(first, last uint32) []uint32 {
	var gs []uint32
	for g := first; g <= last; g++ {
		gs = append(gs, g)
	}
	return gs
}

// tableOf returns a table of n members of various sizes.
func tableOf(n int) *verify.Table {
	ms := make([]verify.Member, n)
	for i := range ms {
		ms[i] = verify.Member{Path: fmt.Sprintf("m/%06d", i), Size: int64(i) * 5000}
	}
	return verify.NewTable(ms)
}

// unbounded returns a Decoder for any member index and granule, with no
// cap: for tests of the format itself.
func unbounded() *Decoder {
	return &Decoder{members: 1 << 32, granules: func(uint32) uint64 { return 1 << 32 }, worth: math.MaxInt64 / 64, left: math.MaxInt64 / 8}
}

// decode decodes text with an unbounded Decoder.
func decode(text string) (*Set, error) { return unbounded().Decode(text) }
