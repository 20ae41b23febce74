package consumed

import (
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/pinfs/pinfs/verify"
)

// Tracker records which members of a snapshot a mount opened and read,
// and which granules of them. Members are identified by their index in
// the Table given to NewTracker. All methods may be called concurrently;
// Opened and Read take no lock (a few atomic operations per call).
//
// A read marks every granule (4 KiB) that it touches, so a read that is
// not page-aligned counts the whole pages around it: the consumed set may
// claim a little more than was read, never less, which is the safe side
// for "did this run see that record?".
//
// Delta hands out what changed since the last Delta. A member is dirty
// from the change until a Delta takes it; Opened and Read mark it dirty
// after they mark what they recorded, and Delta clears the mark before it
// looks, so a change racing a Delta is either in it or in the next one.
type Tracker struct {
	members *verify.Table
	state   []atomic.Pointer[memberState] // made on a member's first open, read or seed
	dirty   []atomic.Uint64               // a bit per member: changed since the last Delta
	opened  atomic.Int64                  // members opened by this process
	pt      passedThrough                 // members served by FUSE passthrough (passthrough.go)
}

type memberState struct {
	here   atomic.Bool                     // opened by this process
	known  atomic.Bool                     // in the set: opened, read or seeded
	full   atomic.Bool                     // seeded as read in full
	bytes  atomic.Int64                    // bytes in marked granules
	bitmap atomic.Pointer[[]atomic.Uint64] // one bit per granule, made on first read
}

// NewTracker returns a Tracker for the members of t; only their sizes are
// used. It costs 8 bytes and a bit per member, and the state of each
// member opened, read or seeded.
func NewTracker(t *verify.Table) *Tracker {
	return &Tracker{
		members: t,
		state:   make([]atomic.Pointer[memberState], t.Len()),
		dirty:   make([]atomic.Uint64, (t.Len()+63)/64),
	}
}

// changed marks member i dirty, for the next Delta.
func (t *Tracker) changed(i int) { t.dirty[i/64].Or(1 << (i % 64)) }

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
	st := t.stateOf(i)
	if st.here.CompareAndSwap(false, true) {
		t.opened.Add(1)
	}
	if st.known.CompareAndSwap(false, true) {
		t.changed(i)
	}
}

// MembersOpened returns how many distinct members this process opened:
// members only seeded do not count, a seeded member opened again does.
func (t *Tracker) MembersOpened() int64 { return t.opened.Load() }

// Read records that n bytes of member i were read from offset off. The
// part beyond the member's size is ignored, as is any read of a member
// seeded as read in full. i must index the members, as for Opened.
func (t *Tracker) Read(i int, off, n int64) {
	size := t.members.Size(i)
	if off < 0 || n <= 0 || off >= size {
		return
	}
	st := t.stateOf(i)
	if st.full.Load() {
		return
	}
	end := size
	if n < size-off {
		end = off + n
	}
	if st.mark(size, off/Granule, (end-1)/Granule) {
		st.known.Store(true)
		t.changed(i)
	}
}

// mark sets granules first to last (inclusive) of a member of size bytes,
// and reports whether any was not set before.
func (st *memberState) mark(size, first, last int64) bool {
	bm := st.bitmap.Load()
	if bm == nil {
		words := make([]atomic.Uint64, (size+64*Granule-1)/(64*Granule))
		if st.bitmap.CompareAndSwap(nil, &words) {
			bm = &words
		} else {
			bm = st.bitmap.Load()
		}
	}
	endG := (size - 1) / Granule             // the member's last granule
	short := Granule - (size - endG*Granule) // how much shorter than a granule it is
	var grew bool
	for w := first / 64; w <= last/64; w++ {
		lo, hi := max(first, w*64), min(last, w*64+63)
		mask := ^uint64(0) >> (63 - (hi - lo)) << (lo - w*64)
		added := mask &^ (*bm)[w].Or(mask)
		if added == 0 {
			continue
		}
		b := int64(bits.OnesCount64(added)) * Granule
		if w == endG/64 && added&(1<<(endG%64)) != 0 {
			b -= short
		}
		st.bytes.Add(b)
		grew = true
	}
	return grew
}

// Seed adds s, what earlier mounts of the run consumed, to the tracker,
// before it serves: Set includes it, Delta does not (until a member of it
// changes), and MembersOpened does not count it. It returns an error, and
// adds nothing, if s names a member or a granule beyond the table.
func (t *Tracker) Seed(s *Set) error {
	if err := s.Check(len(t.state)); err != nil {
		return err
	}
	for i, p := range s.Parts {
		if size := t.members.Size(int(i)); !p.IsEmpty() && (size == 0 || int64(p.Maximum()) > (size-1)/Granule) {
			return fmt.Errorf("consumed set names granule %d of member %d, beyond its %d bytes", p.Maximum(), i, size)
		}
	}
	s.Opened.Iterate(func(i uint32) bool {
		t.stateOf(int(i)).known.Store(true)
		return true
	})
	s.Full.Iterate(func(i uint32) bool {
		st := t.stateOf(int(i))
		st.full.Store(true)
		st.known.Store(true)
		return true
	})
	for i, p := range s.Parts {
		if s.Full.Contains(i) || p.IsEmpty() {
			continue
		}
		st, size := t.stateOf(int(i)), t.members.Size(int(i))
		p.Iterate(func(g uint32) bool {
			st.mark(size, int64(g), int64(g))
			return true
		})
		st.known.Store(true)
	}
	return nil
}

// Delta returns what changed since the last Delta (or since the tracker
// was made): for each member that changed, that it was opened, and either
// that it was read in full or all its granules read so far (repeats are
// harmless: sets are unioned). An empty Set means nothing changed. It
// costs a scan of a bit per member, and the members that changed.
func (t *Tracker) Delta() *Set {
	var c collector
	for w := range t.dirty {
		for bs := t.dirty[w].Swap(0); bs != 0; bs &= bs - 1 {
			i := w*64 + bits.TrailingZeros64(bs)
			if st := t.state[i].Load(); st != nil {
				c.add(t, i, st)
			}
		}
	}
	return c.set()
}

// Requeue marks the members of d, a Delta that could not be written, as
// changed, so that the next Delta carries them again.
func (t *Tracker) Requeue(d *Set) {
	mark := func(i uint32) bool {
		if int64(i) < int64(len(t.state)) {
			t.changed(int(i))
		}
		return true
	}
	d.Opened.Iterate(mark)
	d.Full.Iterate(mark)
	for i := range d.Parts {
		mark(i)
	}
}

// Set returns everything recorded so far, the seed included.
func (t *Tracker) Set() *Set {
	var c collector
	for i := range t.state {
		if st := t.state[i].Load(); st != nil {
			c.add(t, i, st)
		}
	}
	return c.set()
}

// collector builds a Set from member states added in index order.
type collector struct {
	s            *Set
	opened, full []uint32
	words        []uint64
}

// add adds member i, whose state is st, if it is in the set.
func (c *collector) add(t *Tracker, i int, st *memberState) {
	if !st.known.Load() {
		return
	}
	if c.s == nil {
		c.s = NewSet()
	}
	c.opened = append(c.opened, uint32(i))
	size := t.members.Size(i)
	if st.full.Load() || size == 0 || st.bytes.Load() == size {
		c.full = append(c.full, uint32(i))
		return
	}
	bm := st.bitmap.Load()
	if bm == nil {
		return
	}
	c.words = c.words[:0]
	nonzero := false
	for w := range *bm {
		v := (*bm)[w].Load()
		c.words = append(c.words, v)
		nonzero = nonzero || v != 0
	}
	if nonzero {
		c.s.Parts[uint32(i)] = roaring.FromDense(c.words, true)
	}
}

// set returns the Set of the members added.
func (c *collector) set() *Set {
	if c.s == nil {
		return NewSet()
	}
	c.s.Opened.AddMany(c.opened)
	c.s.Full.AddMany(c.full)
	return c.s
}
