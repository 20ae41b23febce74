package consumed

import (
	"reflect"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
)

func TestUnion(t *testing.T) {
	tests := []struct {
		name string
		a, b *Set
		want *Set
	}{
		{"disjoint", set([]uint32{1}, []uint32{2}, map[uint32][]uint32{3: {0}}), set([]uint32{4}, []uint32{5}, map[uint32][]uint32{6: {1}}),
			set([]uint32{1, 4}, []uint32{2, 5}, map[uint32][]uint32{3: {0}, 6: {1}})},
		{"parts merge", set(nil, nil, map[uint32][]uint32{3: {0, 1}}), set(nil, nil, map[uint32][]uint32{3: {1, 7}}),
			set(nil, nil, map[uint32][]uint32{3: {0, 1, 7}})},
		{"full in b drops a's part", set(nil, nil, map[uint32][]uint32{3: {0}, 4: {2}}), set(nil, []uint32{3}, nil),
			set(nil, []uint32{3}, map[uint32][]uint32{4: {2}})},
		{"full in a ignores b's part", set(nil, []uint32{3}, nil), set(nil, nil, map[uint32][]uint32{3: {0}}),
			set(nil, []uint32{3}, nil)},
		{"many fulls, few parts", set(nil, nil, map[uint32][]uint32{3: {0}}), set(nil, []uint32{1, 2, 3, 4, 5}, nil),
			set(nil, []uint32{1, 2, 3, 4, 5}, nil)},
		{"empty", NewSet(), NewSet(), NewSet()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bBefore := describe(tc.b)
			tc.a.Union(tc.b)
			checkInvariants(t, tc.a)
			if !equal(tc.a, tc.want) {
				t.Fatalf("union = %s, want %s", describe(tc.a), describe(tc.want))
			}
			if describe(tc.b) != bBefore {
				t.Fatalf("Union changed its argument: %s, was %s", describe(tc.b), bBefore)
			}
			for i, p := range tc.a.Parts { // no memory shared with b
				if q := tc.b.Parts[i]; q != nil {
					p.Add(1 << 30)
					if q.Contains(1 << 30) {
						t.Fatalf("part %d shared with the argument", i)
					}
				}
			}
		})
	}
}

func TestBytes(t *testing.T) {
	s := set([]uint32{9}, []uint32{1}, map[uint32][]uint32{0: {0, 2}, 2: {3}, 3: {0, 1, 2, 50}})
	tests := []struct {
		i    uint32
		size int64
		want int64
	}{
		{1, 77, 77},                       // full
		{0, 10 * Granule, 2 * Granule},    // granules
		{2, 3*Granule + 10, 10},           // only the tail granule, cut
		{3, 2*Granule + 1, 2*Granule + 1}, // tail cut, granule beyond the member ignored
		{9, 100, 0},                       // opened only
		{7, 100, 0},                       // not in the set
		{0, 0, 0},                         // a part of an empty member counts nothing
	}
	for _, tc := range tests {
		if got := s.Bytes(tc.i, tc.size); got != tc.want {
			t.Errorf("Bytes(%d, %d) = %d, want %d", tc.i, tc.size, got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		s       *Set
		n       int
		wantErr string
	}{
		{set([]uint32{0, 4}, []uint32{3}, map[uint32][]uint32{2: {0}}), 5, ""},
		{NewSet(), 0, ""},
		{set([]uint32{5}, nil, nil), 5, "index 5"},
		{set(nil, []uint32{1, 7}, nil), 5, "index 7"},
		{&Set{Opened: NewSet().Opened, Full: NewSet().Full, Parts: set(nil, nil, map[uint32][]uint32{6: {0}}).Parts}, 5, "index 6"},
	}
	for _, tc := range tests {
		err := tc.s.Check(tc.n)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("Check(%s, %d) = %v, want %q", describe(tc.s), tc.n, err, tc.wantErr)
		}
	}
}

func TestSummarize(t *testing.T) {
	ms := trackerMembers() // b (train), a (train), empty (val), unread (val), nosplit
	tab := verify.NewTable(ms)
	s := set([]uint32{2, 3}, []uint32{0}, map[uint32][]uint32{1: {0, 5}, 4: {0, 1, 2}})
	s.Opened.Add(99) // beyond the table: ignored
	got := s.Summarize(tab)
	want := Summary{
		MembersOpened: 5, MembersFull: 3, Bytes: ms[0].Size + 2*Granule + 3*Granule,
		Splits: map[string]*Counts{
			"train":  {MembersOpened: 2, MembersFull: 1, Bytes: ms[0].Size + 2*Granule},
			"val":    {MembersOpened: 2, MembersFull: 1, Bytes: 0},           // the empty member is full
			"(none)": {MembersOpened: 1, MembersFull: 1, Bytes: 3 * Granule}, // granules covering it count as full
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Summarize = %+v, want %+v", show(got), show(want))
	}
	if got := NewSet().Summarize(tab); got.MembersOpened != 0 || len(got.Splits) != 0 {
		t.Fatalf("empty set summarised as %+v", show(got))
	}
}

func show(s Summary) map[string]Counts {
	m := map[string]Counts{"": {s.MembersOpened, s.MembersFull, s.Bytes}}
	for k, c := range s.Splits {
		m[k] = *c
	}
	return m
}

func TestFromLegacy(t *testing.T) {
	ms := trackerMembers()
	tab := verify.NewTable(ms)
	tests := []struct {
		name    string
		in      []Legacy
		want    *Set
		wantErr string
	}{
		{"none", nil, NewSet(), ""},
		{"full, partial, empty", []Legacy{
			{Path: "train/a.bin", Bytes: 2*Granule + 1},
			{Path: "train/b.bin", Bytes: ms[0].Size, Full: true},
			{Path: "val/empty", Full: true},
		}, set(nil, []uint32{0, 2}, map[uint32][]uint32{1: {0, 1, 2}}), ""},
		{"all bytes without the flag is full", []Legacy{{Path: "val/unread", Bytes: 5}}, set(nil, []uint32{3}, nil), ""},
		{"no bytes is opened", []Legacy{{Path: "val/unread"}}, set([]uint32{3}, nil, nil), ""},
		{"repeats union", []Legacy{{Path: "train/a.bin", Bytes: 1}, {Path: "train/a.bin", Bytes: 3 * Granule}},
			set(nil, nil, map[uint32][]uint32{1: {0, 1, 2}}), ""},
		{"unknown path", []Legacy{{Path: "train/a.bin", Bytes: 1}, {Path: "nope", Bytes: 1}}, nil, `"nope"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromLegacy(tab, tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("FromLegacy = %v, want an error naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, got)
			if !equal(got, tc.want) {
				t.Fatalf("FromLegacy = %s, want %s", describe(got), describe(tc.want))
			}
		})
	}
	// The byte count of a partial member survives when it is a whole
	// number of granules.
	s, err := FromLegacy(tab, []Legacy{{Path: "train/a.bin", Bytes: 7 * Granule}})
	if err != nil || s.Bytes(1, ms[1].Size) != 7*Granule {
		t.Fatalf("FromLegacy 7 granules: %v, %d bytes", err, s.Bytes(1, ms[1].Size))
	}
}
