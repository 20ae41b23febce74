package verify_test

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
)

// TestStreamedProblemsMatchCheck compares the problems found as a table
// is parsed with (*Table).Check of the same table: same problems, same
// order, same Path and ID fields, on sorted tables with unsafe and
// conflicting paths, ids that differ from paths, and bad members.
func TestStreamedProblemsMatchCheck(t *testing.T) {
	t.Parallel()
	streamedProblemsMatchCheck(t)
}

// TestStreamedProblemsMatchCheckChunked is TestStreamedProblemsMatchCheck
// with a chunk per line, so that the problems of members of different
// chunks are joined (a parent that is a file in the chunk before).
func TestStreamedProblemsMatchCheckChunked(t *testing.T) {
	defer verify.SetMinChunk(64)()
	streamedProblemsMatchCheck(t)
}

func streamedProblemsMatchCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	comps := []string{"a", "b", "a.b", "..", "", "a b", "é", "a\nb"}
	for round := range 200 {
		seen := map[string]bool{}
		var ms []verify.Member
		for range 1 + rng.IntN(20) {
			var cs []string
			for range 1 + rng.IntN(3) {
				cs = append(cs, comps[rng.IntN(len(comps))])
			}
			p := strings.Join(cs, "/")
			if seen[p] {
				continue
			}
			seen[p] = true
			m := s3Member(p)
			if rng.IntN(2) == 0 {
				m = casMember(p)
			}
			switch rng.IntN(4) {
			case 0:
				m.ID = comps[rng.IntN(len(comps))]
			case 1:
				m.Size = 0
			}
			ms = append(ms, m)
		}
		slices.SortFunc(ms, func(a, b verify.Member) int { return strings.Compare(a.Path, b.Path) })
		tab, got, err := verify.ParseTableProblems(encode(t, ms))
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if want := tab.Check(); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d, members %+v:\n got %v\nwant %v", round, ms, got, want)
		}
	}
}
