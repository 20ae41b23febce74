package lineage

import (
	"bytes"
	"cmp"
	"slices"

	"github.com/pinfs/pinfs/verify"
)

// Change is one member that differs between two snapshots.
type Change struct {
	Path string         `json:"path"`
	From *verify.Member `json:"from,omitempty"`
	To   *verify.Member `json:"to,omitempty"`
}

// Diff lists what changed from snapshot a to snapshot b. Members match by
// path. A member is changed when its digest, version, size or source
// differs; it moved when it keeps its bytes but its split changed (at the
// same path, or removed in one split and added with the same digest in
// another). Each list is sorted by path.
type Diff struct {
	From    verify.Digest  `json:"from"`
	To      verify.Digest  `json:"to"`
	Added   []Change       `json:"added"`
	Removed []Change       `json:"removed"`
	Changed []Change       `json:"changed"`
	Moved   []Change       `json:"moved"`
	Counts  map[string]int `json:"counts"`
}

// Counts is how many members of each kind a Diff lists.
type Counts struct {
	Added, Removed, Changed, Moved int
}

// Compare computes the diff from table a of snapshot from to table b of
// snapshot to. Both must be sorted by path, as every verified table is.
// It walks them with the accessors and builds a verify.Member only for a
// member that differs: two tables of ten million members cost what their
// changes cost, not two member lists.
func Compare(from, to verify.Digest, a, b *verify.Table) *Diff {
	dl := walk(a, b)
	d := &Diff{From: from, To: to,
		Added: make([]Change, 0, len(dl.added)), Removed: make([]Change, 0, len(dl.removed)),
		Changed: make([]Change, 0, len(dl.changed)), Moved: make([]Change, 0, len(dl.moved))}
	for _, j := range dl.added {
		m := b.Member(int(j))
		d.Added = append(d.Added, Change{Path: m.Path, To: &m})
	}
	for _, i := range dl.removed {
		m := a.Member(int(i))
		d.Removed = append(d.Removed, Change{Path: m.Path, From: &m})
	}
	for _, p := range dl.changed {
		x, y := a.Member(int(p[0])), b.Member(int(p[1]))
		d.Changed = append(d.Changed, Change{y.Path, &x, &y})
	}
	for _, p := range dl.moved {
		x, y := a.Member(int(p[0])), b.Member(int(p[1]))
		d.Moved = append(d.Moved, Change{y.Path, &x, &y})
	}
	c := dl.counts()
	d.Counts = map[string]int{"added": c.Added, "removed": c.Removed, "changed": c.Changed, "moved": c.Moved}
	return d
}

// Count returns the counts of Compare(_, _, a, b) without building its
// lists, for a caller that only reports them (pinfs validate's diff
// against the first parent).
func Count(a, b *verify.Table) Counts { return walk(a, b).counts() }

// delta is a Diff by member index: int32 suffices, as a table within
// store.MaxTable has far fewer than 2^31 members. Every list is in path
// order; a pair is (index in a, index in b), and moved is in the order
// of b, whose path is the Change's.
type delta struct {
	added, removed []int32
	changed, moved [][2]int32
}

func (dl *delta) counts() Counts {
	return Counts{Added: len(dl.added), Removed: len(dl.removed), Changed: len(dl.changed), Moved: len(dl.moved)}
}

// walk merges a and b by path.
func walk(a, b *verify.Table) *delta {
	dl := &delta{}
	var added, removed []int32
	var same [][2]int32 // moves at the same path, in path order
	i, j, na, nb := 0, 0, a.Len(), b.Len()
	for i < na || j < nb {
		var c int
		switch {
		case j == nb:
			c = -1
		case i == na:
			c = 1
		default:
			c = cmp.Compare(a.Path(i), b.Path(j))
		}
		switch {
		case c < 0:
			removed = append(removed, int32(i))
			i++
		case c > 0:
			added = append(added, int32(j))
			j++
		default:
			switch {
			case !sameBytes(a, i, b, j):
				dl.changed = append(dl.changed, [2]int32{int32(i), int32(j)})
			case a.Split(i) != b.Split(j):
				same = append(same, [2]int32{int32(i), int32(j)})
			}
			i++
			j++
		}
	}
	dl.moves(a, b, added, removed, same)
	return dl
}

// moves pairs a removal with an addition of the same digest in another
// split (a move), and fills dl's added, removed and moved. For each added
// member in path order, only the first removal of its digest not yet
// paired (in path order) is a candidate; when it is in the same split the
// member stays added and the removal stays a candidate.
func (dl *delta) moves(a, b *verify.Table, added, removed []int32, same [][2]int32) {
	// The removals sorted by digest, then path: each digest's candidates
	// are a run, consumed from its front; taken[k] counts those consumed
	// of the run that begins at k.
	byDigest := slices.Clone(removed)
	slices.SortFunc(byDigest, func(x, y int32) int {
		return cmp.Or(compareDigest(a, int(x), a, int(y)), cmp.Compare(x, y))
	})
	taken := make([]int32, len(byDigest))
	paired := make([]uint64, (a.Len()+63)/64) // a bit per member of a
	var cross [][2]int32
	for _, j := range added {
		k, found := slices.BinarySearchFunc(byDigest, j, func(x, j int32) int { return compareDigest(a, int(x), b, int(j)) })
		if found {
			if c := k + int(taken[k]); c < len(byDigest) && compareDigest(a, int(byDigest[c]), b, int(j)) == 0 &&
				a.Split(int(byDigest[c])) != b.Split(int(j)) {
				taken[k]++
				paired[byDigest[c]/64] |= 1 << (byDigest[c] % 64)
				cross = append(cross, [2]int32{byDigest[c], j})
				continue
			}
		}
		dl.added = append(dl.added, j)
	}
	for _, i := range removed {
		if paired[i/64]&(1<<(i%64)) == 0 {
			dl.removed = append(dl.removed, i)
		}
	}
	dl.moved = append(same, cross...)
	slices.SortFunc(dl.moved, func(x, y [2]int32) int { return cmp.Compare(x[1], y[1]) })
}

// compareDigest orders member i of a and member j of b by digest, as
// strings: by their BLAKE3 sums when both are well formed (the string is
// then blake3:<the sum's lower-case hex>, so the order is the same).
func compareDigest(a *verify.Table, i int, b *verify.Table, j int) int {
	x, okx := a.Sum(i)
	y, oky := b.Sum(j)
	if okx && oky {
		return bytes.Compare(x[:], y[:])
	}
	return cmp.Compare(a.Digest(i), b.Digest(j))
}

// sameBytes reports whether member i of a and member j of b have the same
// digest, size, source and version. The source, which has no accessor, is
// compared last, and only for members alike in everything else.
func sameBytes(a *verify.Table, i int, b *verify.Table, j int) bool {
	if a.Size(i) != b.Size(j) || compareDigest(a, i, b, j) != 0 {
		return false
	}
	va, s3a := a.Version(i)
	vb, s3b := b.Version(j)
	if s3a != s3b || va != vb {
		return false
	}
	if !s3a {
		var x, y [80]byte
		return bytes.Equal(a.AppendCAS(x[:0], i), b.AppendCAS(y[:0], j))
	}
	x, y := a.Member(i), b.Member(j)
	return x.Source() == y.Source()
}
