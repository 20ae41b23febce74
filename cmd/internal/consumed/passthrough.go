package consumed

import (
	"errors"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
)

// passedThrough is the members served by FUSE passthrough since the last
// PassthroughDelta. mu guards pending, made on first use. Passthrough
// opens are rare next to reads (one per open, never per read), so a lock
// costs nothing that matters.
type passedThrough struct {
	mu      sync.Mutex
	pending *roaring.Bitmap
}

// PassedThrough records that member i was opened through FUSE passthrough:
// the kernel read it from a verified cache file, so its reads never reach
// the daemon. It counts as opened and as read in full (the consumed set
// may then say more than was read, never less), and joins the passthrough
// members PassthroughDelta hands out.
func (t *Tracker) PassedThrough(i int) {
	t.Opened(i)
	t.Read(i, 0, t.members.Size(i))
	t.pt.mu.Lock()
	defer t.pt.mu.Unlock()
	if t.pt.pending == nil {
		t.pt.pending = roaring.New()
	}
	t.pt.pending.Add(uint32(i))
}

// PassthroughDelta returns the members PassedThrough recorded since the
// last PassthroughDelta, an empty bitmap for none.
func (t *Tracker) PassthroughDelta() *roaring.Bitmap {
	t.pt.mu.Lock()
	defer t.pt.mu.Unlock()
	b := t.pt.pending
	t.pt.pending = nil
	if b == nil {
		b = roaring.New()
	}
	return b
}

// RequeuePassthrough puts b, a PassthroughDelta that could not be
// written, back, so that the next PassthroughDelta carries it again.
func (t *Tracker) RequeuePassthrough(b *roaring.Bitmap) {
	if b.IsEmpty() {
		return
	}
	t.pt.mu.Lock()
	defer t.pt.mu.Unlock()
	if t.pt.pending == nil {
		t.pt.pending = roaring.New()
	}
	t.pt.pending.Or(b)
}

// EncodeMembers returns the text form of a set of member indices: that of
// the Set in which each of them is read in full, so that Decode, with
// its bounds, reads it back (DecodeMembers). An empty set is "", which a
// JSON field with omitempty leaves out.
func EncodeMembers(b *roaring.Bitmap) string {
	if b.IsEmpty() {
		return ""
	}
	s := NewSet()
	s.Opened.Or(b)
	s.Full.Or(b)
	return s.Encode()
}

// DecodeMembers reads what EncodeMembers wrote, checked against the table
// as Decode checks a set, and charged to the same budget.
func (dc *Decoder) DecodeMembers(text string) (*roaring.Bitmap, error) {
	s, err := dc.Decode(text)
	if err != nil {
		return nil, err
	}
	// Opened holds the members of Parts too, which Full never does.
	if !s.Opened.Equals(s.Full) {
		return nil, errors.New("consumed set: a set of members has members opened or read in part only")
	}
	return s.Full, nil
}
