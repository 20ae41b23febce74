package runrecord

import (
	"math/bits"
	"sort"
	"sync/atomic"

	"github.com/pinfs/pinfs/verify"
)

// granule is the unit in which a Tracker remembers what was read. Reads
// through the kernel's page cache arrive in whole pages, so at 4 KiB the
// consumed byte counts are exact for them; the bitmap costs 32 KiB per GiB
// of a member that was read, allocated only for members that were.
const granule = 4 << 10

// Tracker records which members of a snapshot a mount read, and which
// parts of them. Members are identified by their index in the slice given
// to NewTracker. All methods may be called concurrently; Read and Opened
// take no lock (a few atomic operations per call).
//
// A read marks every granule (4 KiB) that it touches, so a read that is
// not page-aligned counts the whole pages around it: the consumed set may
// claim a little more than was read, never less, which is the safe side
// for "did this run see that record?".
type Tracker struct {
	members []verify.Member
	state   []memberState
	opened  atomic.Int64
}

type memberState struct {
	opened atomic.Bool
	bytes  atomic.Int64                    // bytes in marked granules
	bitmap atomic.Pointer[[]atomic.Uint64] // one bit per granule, made on first read
}

// NewTracker returns a Tracker for members; only their Path, ID, Digest
// and Size are used. The caller must not change members afterwards.
func NewTracker(members []verify.Member) *Tracker {
	return &Tracker{members: members, state: make([]memberState, len(members))}
}

// Opened records that member i was opened.
func (t *Tracker) Opened(i int) {
	if t.state[i].opened.CompareAndSwap(false, true) {
		t.opened.Add(1)
	}
}

// MembersOpened returns how many distinct members were opened.
func (t *Tracker) MembersOpened() int64 { return t.opened.Load() }

// Read records that n bytes of member i were read from offset off. The
// part beyond the member's size is ignored. i must index the members
// given to NewTracker, as for Opened.
func (t *Tracker) Read(i int, off, n int64) {
	m, st := &t.members[i], &t.state[i]
	if off < 0 || n <= 0 || off >= m.Size {
		return
	}
	end := m.Size
	if n < m.Size-off {
		end = off + n
	}
	bm := st.bitmap.Load()
	if bm == nil {
		words := make([]atomic.Uint64, (m.Size+64*granule-1)/(64*granule))
		if !st.bitmap.CompareAndSwap(nil, &words) {
			bm = st.bitmap.Load()
		} else {
			bm = &words
		}
	}
	endG := (m.Size - 1) / granule              // the member's last granule
	short := granule - (m.Size - endG*granule)  // how much shorter than a granule it is
	first, last := off/granule, (end-1)/granule // granules touched, inclusive
	for w := first / 64; w <= last/64; w++ {
		lo, hi := max(first, w*64), min(last, w*64+63)
		mask := ^uint64(0) >> (63 - (hi - lo)) << (lo - w*64)
		added := mask &^ (*bm)[w].Or(mask)
		if added == 0 {
			continue
		}
		b := int64(bits.OnesCount64(added)) * granule
		if w == endG/64 && added&(1<<(endG%64)) != 0 {
			b -= short
		}
		st.bytes.Add(b)
	}
}

// Snapshot returns the members read so far, fully or in part, sorted by
// path. An empty member counts as fully read once it is opened.
func (t *Tracker) Snapshot() []Consumed {
	var cs []Consumed
	for i := range t.members {
		m, st := &t.members[i], &t.state[i]
		b := st.bytes.Load()
		if b == 0 && !(m.Size == 0 && st.opened.Load()) {
			continue
		}
		cs = append(cs, Consumed{Path: m.Path, ID: m.ID, Digest: m.Digest, Size: m.Size, Bytes: b, Full: b == m.Size})
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].Path < cs[j].Path })
	return cs
}
