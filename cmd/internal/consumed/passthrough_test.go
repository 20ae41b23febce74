package consumed

import (
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/pinfs/pinfs/verify"
)

// TestPassedThrough: a passthrough open counts the member as opened and
// read in full, though no read reached the daemon, and the passthrough
// delta hands out exactly those members, once, with a requeued one again.
func TestPassedThrough(t *testing.T) {
	tr := NewTracker(verify.NewTable(trackerMembers()))
	tr.Opened(3)
	tr.Read(1, 0, Granule) // read in part through the daemon
	tr.PassedThrough(0)
	tr.PassedThrough(2) // empty
	tr.PassedThrough(0) // opened twice
	want := set([]uint32{3}, []uint32{0, 2}, map[uint32][]uint32{1: {0}})
	if got := tr.Set(); !equal(got, want) {
		t.Fatalf("Set() = %s, want %s", describe(got), describe(want))
	}
	if d := tr.Delta(); !equal(d, want) {
		t.Errorf("Delta() = %s, want %s", describe(d), describe(want))
	}
	if n := tr.MembersOpened(); n != 3 { // 3, 0 and 2: member 1 was read, not opened
		t.Errorf("MembersOpened() = %d, want 3", n)
	}
	if pt := tr.PassthroughDelta(); !pt.Equals(roaring.BitmapOf(0, 2)) {
		t.Errorf("PassthroughDelta() = %v, want [0 2]", pt.ToArray())
	}
	if pt := tr.PassthroughDelta(); !pt.IsEmpty() {
		t.Errorf("second PassthroughDelta() = %v, want none", pt.ToArray())
	}
	tr.PassedThrough(4)
	tr.RequeuePassthrough(roaring.BitmapOf(0))
	if pt := tr.PassthroughDelta(); !pt.Equals(roaring.BitmapOf(0, 4)) {
		t.Errorf("PassthroughDelta() after a requeue = %v, want [0 4]", pt.ToArray())
	}
}

// TestEncodeMembers: a set of members reads back as itself through the
// table's bounds; none encodes as ""; a set with a member beyond the
// table, or read in part, is refused.
func TestEncodeMembers(t *testing.T) {
	table := verify.NewTable(trackerMembers())
	if s := EncodeMembers(roaring.New()); s != "" {
		t.Errorf("EncodeMembers(empty) = %q, want \"\"", s)
	}
	b := roaring.BitmapOf(0, 3, 4)
	got, err := NewDecoder(table).DecodeMembers(EncodeMembers(b))
	if err != nil || !got.Equals(b) {
		t.Fatalf("round trip: %v, %v; want %v", got, err, b.ToArray())
	}
	if _, err := NewDecoder(table).DecodeMembers(EncodeMembers(roaring.BitmapOf(0, 5))); err == nil {
		t.Error("a member beyond the table's 5 decoded")
	}
	if _, err := NewDecoder(table).DecodeMembers(set(nil, []uint32{0}, map[uint32][]uint32{1: {0}}).Encode()); err == nil {
		t.Error("a set with a member read in part decoded as a set of members")
	}
	if _, err := NewDecoder(table).DecodeMembers(set([]uint32{3}, nil, nil).Encode()); err == nil {
		t.Error("a set with a member only opened decoded as a set of members")
	}
}
