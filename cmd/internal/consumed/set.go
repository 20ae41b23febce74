package consumed

import (
	"fmt"
	"math"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/pinfs/pinfs/verify"
)

// Granule is the unit of "which bytes were read": a read marks every
// granule it touches. Reads through the kernel's page cache arrive in
// whole pages, so at 4 KiB the byte counts are exact for them. Granule
// indices are uint32, so members up to 16 TiB are tracked exactly.
const Granule = 4 << 10

// Set is a consumed set keyed by member index in the snapshot's member
// table. Its invariants: Opened contains Full and the keys of Parts, no
// key of Parts is in Full, and no bitmap of Parts is empty. A Set is not
// safe for concurrent use.
type Set struct {
	Opened *roaring.Bitmap            // members opened or read (a superset of Full and of Parts' keys)
	Full   *roaring.Bitmap            // members read in full (an empty member counts once opened)
	Parts  map[uint32]*roaring.Bitmap // granules read of members read in part; no key that is in Full
}

// NewSet returns an empty Set.
func NewSet() *Set {
	return &Set{Opened: roaring.New(), Full: roaring.New(), Parts: map[uint32]*roaring.Bitmap{}}
}

// Union adds o to s, in place, keeping the invariants: a member in the
// Full of either is Full, and its Parts are dropped. o is not changed and
// shares no memory with s afterwards.
func (s *Set) Union(o *Set) {
	if o == nil {
		return
	}
	s.Opened.Or(o.Opened)
	s.Full.Or(o.Full)
	for i, p := range o.Parts {
		if s.Full.Contains(i) || p.IsEmpty() {
			continue
		}
		s.Opened.Add(i)
		if q := s.Parts[i]; q != nil {
			q.Or(p)
		} else {
			s.Parts[i] = p.Clone()
		}
	}
	// Drop the parts of members that o made full: look up whichever side
	// is smaller.
	if uint64(len(s.Parts)) < o.Full.GetCardinality() {
		for i := range s.Parts {
			if o.Full.Contains(i) {
				delete(s.Parts, i)
			}
		}
	} else if len(s.Parts) > 0 {
		o.Full.Iterate(func(i uint32) bool {
			delete(s.Parts, i)
			return true
		})
	}
}

// Empty reports whether s holds no member.
func (s *Set) Empty() bool {
	return s.Opened.IsEmpty() && s.Full.IsEmpty() && len(s.Parts) == 0
}

// Check returns an error naming the first member index that is not below
// n, the number of members of the table s is meant for.
func (s *Set) Check(n int) error {
	bad := func(i uint32) error {
		return fmt.Errorf("consumed set names member index %d, beyond the table's %d members", i, n)
	}
	for _, b := range []*roaring.Bitmap{s.Opened, s.Full} {
		if !b.IsEmpty() && int64(b.Maximum()) >= int64(n) {
			return bad(b.Maximum())
		}
	}
	worst, found := uint32(0), false
	for i := range s.Parts {
		if int64(i) >= int64(n) && (!found || i > worst) {
			worst, found = i, true
		}
	}
	if found {
		return bad(worst)
	}
	return nil
}

// Bytes returns the distinct bytes of member i, of size bytes, that s
// holds as read: size if it is Full, its granules times Granule (the last
// granule of the member cut to size, granules beyond it ignored) if it is
// read in part, and 0 if it was only opened or is not in s.
func (s *Set) Bytes(i uint32, size int64) int64 {
	if s.Full.Contains(i) {
		return size
	}
	p := s.Parts[i]
	if p == nil || size <= 0 {
		return 0
	}
	last := uint64((size - 1) / Granule)
	if last > math.MaxUint32 {
		last = math.MaxUint32
	}
	b := int64(p.Rank(uint32(last))) * Granule
	if p.Contains(uint32(last)) && int64(last) == (size-1)/Granule {
		b -= (int64(last)+1)*Granule - size
	}
	return b
}

// Summary is what a consumed set amounts to, for a report.
type Summary struct {
	MembersOpened int64              `json:"members_opened"`
	MembersFull   int64              `json:"members_full"`
	Bytes         int64              `json:"bytes"`
	Splits        map[string]*Counts `json:"splits,omitempty"` // by verify.Table.Split; "" is keyed "(none)"
}

// Counts is a Summary of the members of one split.
type Counts struct {
	MembersOpened int64 `json:"members_opened"`
	MembersFull   int64 `json:"members_full"`
	Bytes         int64 `json:"bytes"`
}

// NoSplit is the key of Summary.Splits for members without a split.
const NoSplit = "(none)"

// Summarize counts the members of s, and their distinct bytes, in all and
// per split of t. A member counts as full when s holds all its bytes
// (Full, or granules that cover it; an empty member once opened).
// Indices beyond t are ignored: call Check first to refuse them.
func (s *Set) Summarize(t *verify.Table) Summary {
	sum := Summary{Splits: map[string]*Counts{}}
	n := t.Len()
	var (
		lastSplit string
		c         *Counts
	)
	buf := make([]uint32, 4096)
	it := s.Opened.ManyIterator()
	for k := it.NextMany(buf); k > 0; k = it.NextMany(buf) {
		for _, i := range buf[:k] {
			if int64(i) >= int64(n) {
				continue
			}
			split := t.Split(int(i))
			if split == "" {
				split = NoSplit
			}
			if c == nil || split != lastSplit {
				if c = sum.Splits[split]; c == nil {
					c = new(Counts)
					sum.Splits[split] = c
				}
				lastSplit = split
			}
			size := t.Size(int(i))
			b := s.Bytes(i, size)
			c.MembersOpened++
			c.Bytes += b
			if b == size {
				c.MembersFull++
			}
		}
	}
	for _, c := range sum.Splits {
		sum.MembersOpened += c.MembersOpened
		sum.MembersFull += c.MembersFull
		sum.Bytes += c.Bytes
	}
	return sum
}
