package derive

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pinfs/pinfs/cmd/internal/lineage"
	"github.com/pinfs/pinfs/verify"
)

// maxPaths is how many paths of each group a drift message names.
const maxPaths = 5

// DriftError reports that a derivation's transform version gave other
// bytes than recorded: the code changed without a new version, or it is
// not deterministic.
type DriftError struct {
	Transform string
	Recorded  verify.Digest
	Rerun     verify.Digest
	// Changed, Added and Removed are the member paths that differ, sorted;
	// Missing is set instead when the recorded output could not be read
	// from the store, and says why.
	Changed, Added, Removed []string
	Missing                 string
}

// Error is one line: the transform, the members that differ (at most
// maxPaths a group), and both digests.
func (e *DriftError) Error() string {
	return fmt.Sprintf("transform %s produced different bytes than recorded (%s): "+
		"the derivation changed without a new version (recorded %s, rerun %s)",
		verify.Printable(e.Transform), e.what(), e.Recorded, e.Rerun)
}

// what lists the groups that are not empty: "3 changed: a, b, c; 1 added: d".
func (e *DriftError) what() string {
	if e.Missing != "" {
		return e.Missing
	}
	var groups []string
	for _, g := range []struct {
		verb  string
		paths []string
	}{{"changed", e.Changed}, {"added", e.Added}, {"removed", e.Removed}} {
		if len(g.paths) == 0 {
			continue
		}
		shown := make([]string, 0, maxPaths+1)
		for _, p := range g.paths[:min(len(g.paths), maxPaths)] {
			shown = append(shown, verify.Printable(p))
		}
		if len(g.paths) > maxPaths {
			shown = append(shown, "…")
		}
		groups = append(groups, fmt.Sprintf("%d %s: %s", len(g.paths), g.verb, strings.Join(shown, ", ")))
	}
	if len(groups) == 0 {
		return "the same members; the manifests differ in other fields"
	}
	return strings.Join(groups, "; ")
}

// Drift returns the DriftError of a rerun whose output b differs from the
// recorded output a. A member that moved to another path with the same
// bytes counts as removed at its old path and added at its new one.
func Drift(transform string, a, b *verify.Snapshot) *DriftError {
	df := lineage.Compare(a.Digest(), b.Digest(), a.Table(), b.Table())
	e := &DriftError{Transform: transform, Recorded: a.Digest(), Rerun: b.Digest()}
	for _, c := range df.Changed {
		e.Changed = append(e.Changed, c.Path)
	}
	for _, c := range df.Added {
		e.Added = append(e.Added, c.Path)
	}
	for _, c := range df.Removed {
		e.Removed = append(e.Removed, c.Path)
	}
	for _, c := range df.Moved {
		if c.From.Path == c.To.Path { // another split at the same path
			e.Changed = append(e.Changed, c.Path)
			continue
		}
		e.Removed = append(e.Removed, c.From.Path)
		e.Added = append(e.Added, c.To.Path)
	}
	slices.Sort(e.Changed)
	slices.Sort(e.Added)
	slices.Sort(e.Removed)
	return e
}
