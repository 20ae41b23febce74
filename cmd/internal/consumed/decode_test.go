package consumed

import (
	"github.com/RoaringBitmap/roaring/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
)

// boundTable is a table of a member of 10 granules, an empty one and one
// of a single short granule.
func boundTable() *verify.Table {
	return verify.NewTable([]verify.Member{
		{Path: "a", Size: 10 * Granule}, {Path: "b", Size: 0}, {Path: "c", Size: 5},
	})
}

func TestDecoderRefusesWhatTheTableCannotHold(t *testing.T) {
	const empty = 0
	tests := []struct {
		name, text, want string
	}{
		{"opened beyond the table", uvarints(1, 3, 0, empty, empty), "opened bitmap names member 3, beyond the table's 3 members"},
		{"full run beyond the table", uvarints(empty, 1, 1, 2, empty), "full bitmap names member 3, beyond the table's 3 members"},
		{"more runs than the table", uvarints(3, 0, 1, 1, 0, 0, 0, empty, empty), "opened bitmap of 3 runs, more than the table's 3 members can hold"},
		{"part of a member beyond the table", uvarints(empty, empty, 1, 5, 0, 1, 0, 0), "parts' members bitmap names member 5"},
		{"granule beyond the member", uvarints(empty, empty, 1, 0, 0, 1, 10, 0), "part of member 0 names granule 10, beyond its 10 granules"},
		{"granule of an empty member", uvarints(empty, empty, 1, 1, 0, 1, 0, 0), "part of member 1 of 1 runs, more than its 0 granules can hold"},
		{"long run beyond the member", uvarints(empty, empty, 1, 2, 0, 1, 0, 1), "part of member 2 names granule 1, beyond its 1 granules"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewDecoder(boundTable()).Decode(tc.text)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode = %v, %v; want an error with %q", s, err, tc.want)
			}
			if _, err := decode(tc.text); err != nil {
				t.Fatalf("the same text without a table: %v; want it well-formed, so the table refuses it", err)
			}
		})
	}
	// The largest index and granules of each member are accepted.
	want := set([]uint32{1}, nil, map[uint32][]uint32{0: {0, 9}, 2: {0}})
	if s, err := NewDecoder(boundTable()).Decode(want.Encode()); err != nil || !equal(s, want) {
		t.Fatalf("a set within the table: %v, %v", s, err)
	}
}

// A few kilobytes naming a million members in part are refused against a
// table of three before any of them is made: what the refusal allocates
// does not grow with what the text claims.
func TestDecoderRefusesABombBeforeAllocating(t *testing.T) {
	var bin []byte
	bin = append(bin, 0, 0)                   // opened, full: none
	bin = append(bin, 1, 0, 0xff, 0xff, 0x3f) // parts' members: 0..1<<20-1
	for range 1 << 20 {
		bin = append(bin, 1, 0, 0) // granule 0 of each
	}
	text := deflated(bin)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := NewDecoder(boundTable()).Decode(text)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "table's 3 members") {
		t.Fatalf("Decode of %d bytes naming 1M members = %v, want it refused naming the table", len(text), err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 256<<10 {
		t.Fatalf("refusing it allocated %d bytes, want at most 256 KiB for a table of 3 members", got)
	}
}

// The deltas a tracker writes for a run, repeats included, stay within the
// run's cap; copies of the table's worth beyond the cap are refused.
func TestDecoderCapsTheRun(t *testing.T) {
	tab := tableOf(300)
	tr := NewTracker(tab)
	dec := NewDecoder(tab)
	for k := range 200 { // each delta repeats every granule read so far of a member read on
		i := 1 + k%299
		tr.Opened(i)
		tr.Read(i, int64(k)*Granule%tab.Size(i), 1)
		if _, err := dec.Decode(tr.Delta().Encode()); err != nil {
			t.Fatalf("delta %d: %v", k, err)
		}
	}
	whole := NewSet() // every member in part, every other granule: the most a set of tab costs
	for i := range uint32(300) {
		if size := tab.Size(int(i)); size > Granule {
			whole.Opened.Add(i)
			whole.Parts[i] = roaring.New()
			for g := uint32(0); g < uint32((size-1)/Granule); g += 2 {
				whole.Parts[i].Add(g)
			}
		}
	}
	text := whole.Encode()
	dec = NewDecoder(tab)
	for k := range 100 {
		_, err := dec.Decode(text)
		if err != nil {
			if k < runFactor || !strings.Contains(err.Error(), "the run's consumed sets cost more than") {
				t.Fatalf("copy %d of the table's worth: %v; want the first %d accepted, then the run's cap", k, err, runFactor)
			}
			return
		}
	}
	t.Fatal("100 copies of the table's worth were all accepted")
}
