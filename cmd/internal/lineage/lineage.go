// Package lineage compares snapshots, walks their parent chain and their
// derivation records (`pinfs diff`, `pinfs log` and `pinfs derive log`).
package lineage

import (
	"context"
	"slices"
	"strings"

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

// Compare computes the diff of two member tables sorted by path.
func Compare(from, to verify.Digest, a, b []verify.Member) *Diff {
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
			case !sameBytes(x, y):
				d.Changed = append(d.Changed, Change{x.Path, x, y})
			case x.Split != y.Split:
				d.Moved = append(d.Moved, Change{x.Path, x, y})
			}
			i++
			j++
		}
	}
	// A removal and an addition of the same bytes in another split is a move.
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
	sortChanges(d.Removed)
	sortChanges(d.Moved)
	d.Counts = map[string]int{"added": len(d.Added), "removed": len(d.Removed), "changed": len(d.Changed), "moved": len(d.Moved)}
	return d
}

func sameBytes(x, y *verify.Member) bool {
	return x.Digest == y.Digest && x.Size == y.Size && x.Source() == y.Source() && x.VersionID() == y.VersionID()
}

func sortChanges(cs []Change) {
	slices.SortFunc(cs, func(x, y Change) int { return strings.Compare(x.Path, y.Path) })
}

// Entry is one manifest in a parent walk.
type Entry struct {
	Digest   verify.Digest
	Depth    int
	Manifest *verify.Manifest // nil when Err is set
	Err      error
}

// Log walks the parents of d breadth first, each manifest once, and calls
// fn for each, starting with d itself. A manifest that cannot be fetched
// or fails its digest is reported through Entry.Err and not walked further.
func Log(ctx context.Context, g verify.Getter, d verify.Digest, fn func(Entry)) error {
	seen := map[verify.Digest]bool{d: true}
	queue := []Entry{{Digest: d}}
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := queue[0]
		queue = queue[1:]
		m, err := verify.FetchManifest(ctx, g, e.Digest) // bounded, and a missing one names pinfs list
		if err != nil {
			e.Err = err
			fn(e)
			continue
		}
		e.Manifest = m
		fn(e)
		for _, p := range e.Manifest.Parents {
			if !seen[p] {
				seen[p] = true
				queue = append(queue, Entry{Digest: p, Depth: e.Depth + 1})
			}
		}
	}
	return nil
}
