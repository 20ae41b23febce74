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
// parts of them. Members are identified by their index in the Table given
// to NewTracker. All methods may be called concurrently; Read and Opened
// take no lock (a few atomic operations per call).
//
// A read marks every granule (4 KiB) that it touches, so a read that is
// not page-aligned counts the whole pages around it: the consumed set may
// claim a little more than was read, never less, which is the safe side
// for "did this run see that record?".
type Tracker struct {
	members *verify.Table
	state   []atomic.Pointer[memberState] // made on a member's first open or read
	opened  atomic.Int64
}

type memberState struct {
	opened atomic.Bool
	bytes  atomic.Int64                    // bytes in marked granules
	bitmap atomic.Pointer[[]atomic.Uint64] // one bit per granule, made on first read
}

// NewTracker returns a Tracker for members; only their Path, ID, Digest
// and Size are used. It costs 8 bytes per member, and the state of each
// member opened or read.
func NewTracker(members *verify.Table) *Tracker {
	return &Tracker{members: members, state: make([]atomic.Pointer[memberState], members.Len())}
}

// stateOf returns the state of member i, making it on first use.
func (t *Tracker) stateOf(i int) *memberState {
	if st := t.state[i].Load(); st != nil {
		return st
	}
	st := new(memberState)
	if t.state[i].CompareAndSwap(nil, st) {
		return st
	}
	return t.state[i].Load()
}

// Opened records that member i was opened.
func (t *Tracker) Opened(i int) {
	if t.stateOf(i).opened.CompareAndSwap(false, true) {
		t.opened.Add(1)
	}
}

// MembersOpened returns how many distinct members were opened.
func (t *Tracker) MembersOpened() int64 { return t.opened.Load() }

// Read records that n bytes of member i were read from offset off. The
// part beyond the member's size is ignored. i must index the members
// given to NewTracker, as for Opened.
func (t *Tracker) Read(i int, off, n int64) {
	size := t.members.Size(i)
	if off < 0 || n <= 0 || off >= size {
		return
	}
	st := t.stateOf(i)
	end := size
	if n < size-off {
		end = off + n
	}
	bm := st.bitmap.Load()
	if bm == nil {
		words := make([]atomic.Uint64, (size+64*granule-1)/(64*granule))
		if !st.bitmap.CompareAndSwap(nil, &words) {
			bm = st.bitmap.Load()
		} else {
			bm = &words
		}
	}
	endG := (size - 1) / granule                // the member's last granule
	short := granule - (size - endG*granule)    // how much shorter than a granule it is
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
	for i := range t.state {
		st := t.state[i].Load()
		if st == nil {
			continue
		}
		size, b := t.members.Size(i), st.bytes.Load()
		if b == 0 && !(size == 0 && st.opened.Load()) {
			continue
		}
		ms := t.members
		cs = append(cs, Consumed{Path: ms.Path(i), ID: ms.ID(i), Digest: ms.Digest(i), Size: size, Bytes: b, Full: b == size})
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].Path < cs[j].Path })
	return cs
}
