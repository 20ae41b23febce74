package runrecord

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/pinfs/pinfs/verify"
)

func trackerMembers() []verify.Member {
	return []verify.Member{
		{Path: "train/b.bin", ID: "b", Digest: "blake3:bb", Size: 10*granule + 123}, // short last granule
		{Path: "train/a.bin", ID: "a", Digest: "blake3:aa", Size: 300 * granule},    // several bitmap words
		{Path: "val/empty", ID: "e", Digest: "blake3:ee", Size: 0},
		{Path: "val/unread", ID: "u", Digest: "blake3:uu", Size: 5},
	}
}

func TestTrackerPartialAndFull(t *testing.T) {
	tr := NewTracker(verify.NewTable(trackerMembers()))
	if got := tr.Snapshot(); len(got) != 0 {
		t.Fatalf("nothing read yet, snapshot %+v", got)
	}
	tr.Opened(0)
	tr.Opened(0)
	tr.Opened(2)
	tr.Opened(3)
	if n := tr.MembersOpened(); n != 3 {
		t.Fatalf("MembersOpened = %d, want 3 distinct", n)
	}
	// Member 0: read in two overlapping halves and past its end.
	tr.Read(0, 0, 6*granule)
	tr.Read(0, 4*granule, 100*granule)
	// Member 1: the first page twice, and one byte in page 200.
	tr.Read(1, 0, granule)
	tr.Read(1, 0, granule)
	tr.Read(1, 200*granule+7, 1)
	// Reads that count for nothing.
	tr.Read(3, 5, 10)
	tr.Read(3, -1, 2)
	tr.Read(3, 0, 0)

	got := tr.Snapshot()
	want := []Consumed{
		{Path: "train/a.bin", ID: "a", Digest: "blake3:aa", Size: 300 * granule, Bytes: 2 * granule},
		{Path: "train/b.bin", ID: "b", Digest: "blake3:bb", Size: 10*granule + 123, Bytes: 10*granule + 123, Full: true},
		{Path: "val/empty", ID: "e", Digest: "blake3:ee", Size: 0, Bytes: 0, Full: true},
	}
	if len(got) != len(want) {
		t.Fatalf("snapshot %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("snapshot[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestTrackerLastGranuleAlone(t *testing.T) {
	tr := NewTracker(verify.NewTable(trackerMembers()))
	tr.Read(0, 10*granule+100, 1) // only the short last granule
	got := tr.Snapshot()
	if len(got) != 1 || got[0].Bytes != 123 || got[0].Full {
		t.Fatalf("snapshot %+v, want 123 bytes of b.bin, not full", got)
	}
}

// TestTrackerConcurrent reads every page of a member from many goroutines,
// in random order with overlaps; under -race this also checks that Read
// and Snapshot need no lock.
func TestTrackerConcurrent(t *testing.T) {
	ms := trackerMembers()
	tr := NewTracker(verify.NewTable(ms))
	size := ms[1].Size
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for _, p := range r.Perm(int(size / granule)) {
				tr.Read(1, int64(p)*granule, granule+int64(r.IntN(3))*granule/2)
				tr.Opened(1)
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			for _, c := range tr.Snapshot() {
				if c.Bytes > c.Size {
					t.Errorf("%s: %d bytes read of %d", c.Path, c.Bytes, c.Size)
				}
			}
		}
	})
	wg.Wait()
	got := tr.Snapshot()
	if len(got) != 1 || got[0].Bytes != size || !got[0].Full || tr.MembersOpened() != 1 {
		t.Fatalf("snapshot %+v, opened %d; want a.bin fully read, opened once", got, tr.MembersOpened())
	}
}
