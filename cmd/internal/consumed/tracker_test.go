package consumed

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/pinfs/pinfs/verify"
)

type read struct {
	i       int
	off, n  int64
	notOpen bool // read without Opened
}

func TestTrackerExact(t *testing.T) {
	ms := trackerMembers()
	tests := []struct {
		name  string
		reads []read
		want  *Set
		bytes map[uint32]int64
	}{
		{"nothing", nil, set(nil, nil, nil), nil},
		{"page-aligned", []read{{i: 1, off: 0, n: 2 * Granule}, {i: 1, off: 2 * Granule, n: Granule}},
			set(nil, nil, map[uint32][]uint32{1: {0, 1, 2}}), map[uint32]int64{1: 3 * Granule}},
		{"unaligned marks the pages around", []read{{i: 1, off: 200*Granule + 7, n: 1}, {i: 1, off: Granule - 1, n: 2}},
			set(nil, nil, map[uint32][]uint32{1: {0, 1, 200}}), map[uint32]int64{1: 3 * Granule}},
		{"across bitmap words", []read{{i: 1, off: 60 * Granule, n: 10 * Granule}},
			set(nil, nil, map[uint32][]uint32{1: granules(60, 69)}), map[uint32]int64{1: 10 * Granule}},
		{"tail granule alone", []read{{i: 0, off: 10*Granule + 100, n: 1}},
			set(nil, nil, map[uint32][]uint32{0: {10}}), map[uint32]int64{0: 123}},
		{"past the end is cut, overlaps count once", []read{{i: 0, off: 0, n: 6 * Granule}, {i: 0, off: 4 * Granule, n: 100 * Granule}},
			set(nil, []uint32{0}, nil), map[uint32]int64{0: 10*Granule + 123}},
		{"empty member is full once opened", []read{{i: 2, n: -1}},
			set(nil, []uint32{2}, nil), map[uint32]int64{2: 0}},
		{"opened only", []read{{i: 3, n: -1}}, set([]uint32{3}, nil, nil), map[uint32]int64{3: 0}},
		{"reads of nothing", []read{{i: 3, off: 5, n: 10, notOpen: true}, {i: 3, off: -1, n: 2, notOpen: true}, {i: 3, off: 0, n: 0, notOpen: true}},
			set(nil, nil, nil), nil},
		{"read without open counts as opened", []read{{i: 4, off: Granule, n: 1, notOpen: true}},
			set(nil, nil, map[uint32][]uint32{4: {1}}), map[uint32]int64{4: Granule}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker(verify.NewTable(ms))
			for _, r := range tc.reads {
				if !r.notOpen {
					tr.Opened(r.i)
				}
				if r.n >= 0 {
					tr.Read(r.i, r.off, r.n)
				}
			}
			got := tr.Set()
			checkInvariants(t, got)
			if !equal(got, tc.want) {
				t.Fatalf("Set() = %s, want %s", describe(got), describe(tc.want))
			}
			if d := tr.Delta(); !equal(d, tc.want) {
				t.Errorf("first Delta() = %s, want %s", describe(d), describe(tc.want))
			}
			if d := tr.Delta(); !d.Empty() {
				t.Errorf("second Delta() = %s, want empty", describe(d))
			}
			for i, b := range tc.bytes {
				if got := got.Bytes(i, ms[i].Size); got != b {
					t.Errorf("Bytes(%d) = %d, want %d", i, got, b)
				}
			}
		})
	}
}

func TestTrackerMembersOpened(t *testing.T) {
	tr := NewTracker(verify.NewTable(trackerMembers()))
	if err := tr.Seed(set([]uint32{0, 3}, []uint32{1}, nil)); err != nil {
		t.Fatal(err)
	}
	if n := tr.MembersOpened(); n != 0 {
		t.Fatalf("after Seed MembersOpened = %d, want 0: seeded members do not count", n)
	}
	for _, i := range []int{0, 0, 2, 2, 4} {
		tr.Opened(i)
	}
	if n := tr.MembersOpened(); n != 3 {
		t.Fatalf("MembersOpened = %d, want 3 (one seeded, all distinct)", n)
	}
}

func TestTrackerSeed(t *testing.T) {
	ms := trackerMembers()
	tr := NewTracker(verify.NewTable(ms))
	seed := set([]uint32{3}, []uint32{1}, map[uint32][]uint32{0: {0, 1}})
	if err := tr.Seed(seed); err != nil {
		t.Fatal(err)
	}
	if d := tr.Delta(); !d.Empty() {
		t.Fatalf("Delta after Seed = %s, want empty: the seed is already recorded", describe(d))
	}
	tr.Opened(3)              // seeded: no change
	tr.Read(1, 0, ms[1].Size) // seeded full: nothing new
	tr.Read(0, 0, Granule)    // seeded granule: nothing new
	if d := tr.Delta(); !d.Empty() {
		t.Fatalf("Delta after re-reading seeded bytes = %s, want empty", describe(d))
	}
	tr.Read(0, 5*Granule, 1)
	tr.Opened(4)
	want := set([]uint32{4}, nil, map[uint32][]uint32{0: {0, 1, 5}})
	if d := tr.Delta(); !equal(d, want) {
		t.Fatalf("Delta = %s, want %s (member 0's whole granule set, member 4 opened)", describe(d), describe(want))
	}
	tr.Read(0, 0, ms[0].Size)
	all := set([]uint32{3, 4}, []uint32{0, 1}, nil)
	if got := tr.Set(); !equal(got, all) {
		t.Fatalf("Set = %s, want %s", describe(got), describe(all))
	}
	if got, want := tr.Set().Bytes(0, ms[0].Size), ms[0].Size; got != want {
		t.Fatalf("seeded then completed member: %d bytes, want %d", got, want)
	}
}

func TestTrackerSeedRefuses(t *testing.T) {
	ms := trackerMembers()
	for name, s := range map[string]*Set{
		"index beyond the table":     set([]uint32{5}, nil, nil),
		"full beyond the table":      set(nil, []uint32{9}, nil),
		"granule beyond the member":  set(nil, nil, map[uint32][]uint32{0: {11}}),
		"granule of an empty member": set(nil, nil, map[uint32][]uint32{2: {0}}),
	} {
		t.Run(name, func(t *testing.T) {
			tr := NewTracker(verify.NewTable(ms))
			if err := tr.Seed(s); err == nil {
				t.Fatalf("Seed(%s) succeeded", describe(s))
			}
			if got := tr.Set(); !got.Empty() {
				t.Fatalf("a refused seed left %s", describe(got))
			}
		})
	}
}

func TestTrackerRequeue(t *testing.T) {
	tr := NewTracker(verify.NewTable(trackerMembers()))
	tr.Opened(3)
	tr.Read(1, 0, Granule)
	lost := tr.Delta()
	tr.Read(0, 0, Granule)
	tr.Requeue(lost)
	want := set([]uint32{3}, nil, map[uint32][]uint32{0: {0}, 1: {0}})
	if d := tr.Delta(); !equal(d, want) {
		t.Fatalf("Delta after Requeue = %s, want %s", describe(d), describe(want))
	}
	if d := tr.Delta(); !d.Empty() {
		t.Fatalf("second Delta = %s, want empty", describe(d))
	}
}

// TestTrackerConcurrent reads granules of several members from many
// goroutines while another takes Deltas: under -race this checks that
// Read, Opened and Delta need no lock, and the union of the deltas must
// be exactly what was read, and equal Set.
func TestTrackerConcurrent(t *testing.T) {
	ms := []verify.Member{
		{Path: "a", Size: 1000*Granule + 1},
		{Path: "b", Size: 64 * Granule},
		{Path: "c", Size: 513 * Granule},
		{Path: "d", Size: 7},
		{Path: "e", Size: 200 * Granule},
	}
	for k := range 20000 { // members mostly read once, so a change lost to a Delta stays lost
		ms = append(ms, verify.Member{Path: fmt.Sprintf("f/%05d", k), Size: int64(1+k%3) * Granule})
	}
	tr := NewTracker(verify.NewTable(ms))
	const readers = 8
	read := make([]map[[2]int64]bool, readers) // per reader: {member, granule} read
	var wg sync.WaitGroup
	for g := range readers {
		read[g] = map[[2]int64]bool{}
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for range 3000 {
				i := r.IntN(len(ms))
				if i == 4 {
					continue // member e is never read
				}
				size := ms[i].Size
				off := r.Int64N(size)
				n := 1 + r.Int64N(3*Granule)
				tr.Opened(i)
				tr.Read(i, off, n)
				for gr := off / Granule; gr <= (min(off+n, size)-1)/Granule; gr++ {
					read[g][[2]int64{int64(i), gr}] = true
				}
			}
		})
	}
	union := NewSet()
	done := make(chan struct{})
	var deltas int
	finished := stop(&wg)
	go func() {
		defer close(done)
		for {
			d := tr.Delta()
			checkInvariants(t, d)
			union.Union(d)
			deltas++
			select {
			case <-finished:
				return
			default:
			}
		}
	}()
	<-done
	union.Union(tr.Delta())
	checkInvariants(t, union)
	got := tr.Set()
	if !equal(union, got) {
		t.Fatalf("union of %d deltas %s\n!= Set %s", deltas, describe(union), describe(got))
	}
	want := NewSet()
	for g := range read {
		for k := range read[g] {
			want.Opened.Add(uint32(k[0]))
			if want.Parts[uint32(k[0])] == nil {
				want.Parts[uint32(k[0])] = set(nil, nil, nil).Opened
			}
			want.Parts[uint32(k[0])].Add(uint32(k[1]))
		}
	}
	for i, p := range want.Parts {
		if int64(p.GetCardinality()) == (ms[i].Size+Granule-1)/Granule {
			delete(want.Parts, i)
			want.Full.Add(i)
		}
	}
	if !equal(got, want) {
		t.Fatalf("Set %s\n!= granules read %s", describe(got), describe(want))
	}
	t.Logf("%d deltas raced the reads", deltas)
}

// stop returns a channel closed once wg is done.
func stop(wg *sync.WaitGroup) <-chan struct{} {
	c := make(chan struct{})
	go func() { wg.Wait(); close(c) }()
	return c
}
