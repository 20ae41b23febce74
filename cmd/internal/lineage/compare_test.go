package lineage

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// compareMembers is Compare as it was over two member lists, kept as the
// reference that the table walk must agree with.
func compareMembers(from, to verify.Digest, a, b []verify.Member) *Diff {
	d := &Diff{From: from, To: to, Added: []Change{}, Removed: []Change{}, Changed: []Change{}, Moved: []Change{}}
	var added, removed []*verify.Member
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i].Path < b[j].Path:
			removed = append(removed, &a[i])
			i++
		case i == len(a) || b[j].Path < a[i].Path:
			added = append(added, &b[j])
			j++
		default:
			x, y := &a[i], &b[j]
			switch {
			case !refSameBytes(x, y):
				d.Changed = append(d.Changed, Change{x.Path, x, y})
			case x.Split != y.Split:
				d.Moved = append(d.Moved, Change{x.Path, x, y})
			}
			i++
			j++
		}
	}
	byDigest := map[string][]*verify.Member{}
	for _, m := range removed {
		byDigest[m.Digest] = append(byDigest[m.Digest], m)
	}
	for _, m := range added {
		if cands := byDigest[m.Digest]; len(cands) > 0 && cands[0].Split != m.Split {
			d.Moved = append(d.Moved, Change{m.Path, cands[0], m})
			byDigest[m.Digest] = cands[1:]
			continue
		}
		d.Added = append(d.Added, Change{Path: m.Path, To: m})
	}
	for _, ms := range byDigest {
		for _, m := range ms {
			d.Removed = append(d.Removed, Change{Path: m.Path, From: m})
		}
	}
	byPath := func(x, y Change) int { return strings.Compare(x.Path, y.Path) }
	slices.SortFunc(d.Removed, byPath)
	slices.SortFunc(d.Moved, byPath)
	d.Counts = map[string]int{"added": len(d.Added), "removed": len(d.Removed), "changed": len(d.Changed), "moved": len(d.Moved)}
	return d
}

func refSameBytes(x, y *verify.Member) bool {
	return x.Digest == y.Digest && x.Size == y.Size && x.Source() == y.Source() && x.VersionID() == y.VersionID()
}

// mutate returns a copy of ms, sorted by path, with members removed,
// added (some with the digest of a removed one, in the same split or
// another), changed in each field Compare looks at, and moved to another
// split at the same path.
func mutate(rng *rand.Rand, ms []verify.Member) []verify.Member {
	var out []verify.Member
	var gone []verify.Member
	for _, m := range ms {
		if m.S3 != nil {
			s := *m.S3
			m.S3 = &s
		}
		switch rng.IntN(12) {
		case 0:
			gone = append(gone, m)
			continue
		case 1:
			m.Digest = verifytest.Members(1, verifytest.CAS, rng.Uint64())[0].Digest
		case 2:
			m.Size++
		case 3:
			if m.S3 != nil {
				m.S3.VersionID += "x"
			} else {
				m.CAS = "blake3:" + strings.Repeat("0", 64)
			}
		case 4:
			if m.S3 != nil {
				m.S3.Key += ".moved"
			}
		case 5:
			m.Split = "val"
		case 6:
			m.ID = "other-" + m.ID // not compared: same bytes, same split
		}
		out = append(out, m)
	}
	for k, g := range gone {
		switch k % 4 {
		case 0: // the same bytes in another split, at another path
			g.Path, g.ID, g.Split = "moved/"+g.Path, "moved/"+g.ID, g.Split+"-new"
			out = append(out, g)
		case 1: // the same bytes, the same split, another path: added and removed
			g.Path, g.ID = "copy/"+g.Path, "copy/"+g.ID
			out = append(out, g)
		}
	}
	for k := range rng.IntN(20) {
		m := verifytest.Members(1, verifytest.S3, rng.Uint64())[0]
		m.Path, m.ID = fmt.Sprintf("new/ü-%03d", k), fmt.Sprintf("new/ü-%03d", k)
		out = append(out, m)
	}
	slices.SortFunc(out, func(x, y verify.Member) int { return strings.Compare(x.Path, y.Path) })
	return slices.CompactFunc(out, func(x, y verify.Member) bool { return x.Path == y.Path })
}

// dupDigests gives runs of members of ms one digest, so that several
// removals share one and only the first of each is a move's candidate.
func dupDigests(ms []verify.Member) {
	for i := 0; i+3 < len(ms); i += 7 {
		for k := 1; k < 4; k++ {
			ms[i+k].Digest = ms[i].Digest
		}
	}
}

// TestCompareTablesAsMembers: Compare over two tables gives exactly the
// diff the member-list walk gave, for generated tables with removals,
// additions, changes of digest, size, version, cas and key, moves at the
// same and at another path, repeated digests and a malformed one.
func TestCompareTablesAsMembers(t *testing.T) {
	t.Parallel()
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 1))
		kind := verifytest.Kind(seed % 2)
		a := verifytest.Members(500, kind, seed)
		if seed%4 == 1 {
			dupDigests(a)
		}
		if seed == 3 {
			a[10].Digest = "sha256:not-blake3" // CheckMembers would report it; Compare must still agree
		}
		b := mutate(rng, a)
		ta, tb := verify.NewTable(a), verify.NewTable(b)
		if seed%2 == 0 {
			ta, tb = parsed(t, a), parsed(t, b)
		}
		for _, dir := range [][2]*verify.Table{{ta, tb}, {tb, ta}, {ta, ta}} {
			want := compareMembers("A", "B", dir[0].Members(), dir[1].Members())
			got := Compare("A", "B", dir[0], dir[1])
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d: table walk %v, member walk %v", seed, summary(got), summary(want))
			}
			c := Count(dir[0], dir[1])
			if w := (Counts{len(want.Added), len(want.Removed), len(want.Changed), len(want.Moved)}); c != w {
				t.Fatalf("seed %d: Count %+v, want %+v", seed, c, w)
			}
		}
		if seed == 0 {
			t.Logf("diff: %v", Compare("A", "B", ta, tb).Counts)
		}
	}
}

// parsed is the table of ms as a store gives it: encoded and parsed.
func parsed(t *testing.T, ms []verify.Member) *verify.Table {
	t.Helper()
	b, err := verify.EncodeMembers(ms)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := verify.ParseTable(b)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// summary names the first paths of each list of d, for a failure message.
func summary(d *Diff) string {
	var b strings.Builder
	for name, cs := range map[string][]Change{"added": d.Added, "removed": d.Removed, "changed": d.Changed, "moved": d.Moved} {
		fmt.Fprintf(&b, "%s %d [%s] ", name, len(cs), paths(cs[:min(len(cs), 5)]))
	}
	return b.String()
}
