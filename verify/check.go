package verify

import (
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/pinfs/pinfs/verify/b3"
)

// Problem kinds reported by CheckMembers and by the store checks of
// `pinfs verify`. They are stable strings: scripts and run records match
// on them.
const (
	KindDuplicateID  = "duplicate_id"
	KindUnsafePath   = "unsafe_path"
	KindUnversioned  = "unversioned"
	KindBadMember    = "bad_member"
	KindMissing      = "version_missing"
	KindSizeMismatch = "size_mismatch"
	KindMismatch     = "mismatch"
	KindReadFailed   = "read_failed"
)

// Problem is one failed check of one member.
type Problem struct {
	Kind   string `json:"kind"`
	Path   string `json:"path"`
	ID     string `json:"id,omitempty"`
	Detail string `json:"detail"`
}

// String returns the problem on one line; a path or id that holds a
// control character is quoted (see Printable).
func (p Problem) String() string {
	return fmt.Sprintf("%s: %s (id %s): %s", p.Kind, Printable(p.Path), Printable(p.ID), Printable(p.Detail))
}

// CheckMembers checks the structure of a member table that ParseMembers
// accepted: unique ids (so one split per id), safe and unique paths, no
// path that is both a file and a directory, well-formed digests and sizes,
// the digest of no bytes for a member of size 0, exactly one source per
// member, and a real version id for every S3 member. It returns every
// problem found, in table order.
func CheckMembers(ms []Member) []Problem { return NewTable(ms).Check() }

// Check returns the problems CheckMembers reports for the members of t.
//
// Paths are checked in path order, in which a file that is also a
// directory comes right before the paths below it (with other paths that
// start with its name in between), so no set of all paths is needed.
// When every id equals its path, as in the tables pinfs pin writes, ids
// are unique exactly when paths are; otherwise they are checked in id order.
func (t *Table) Check() []Problem {
	var at []indexed // problems of paths and ids, by member
	add := func(i int, kind, format string, a ...any) {
		at = append(at, indexed{i, Problem{Kind: kind, Path: t.Path(i), ID: t.ID(i), Detail: fmt.Sprintf(format, a...)}})
	}
	t.checkPaths(add)
	t.checkIDs(add)
	sortIndexed(at)

	var ps []Problem
	for i := range t.Len() {
		for len(at) > 0 && at[0].i == i {
			ps = append(ps, at[0].p)
			at = at[1:]
		}
		d := t.decode(i)
		ps = append(ps, memberProblems(&d)...)
	}
	return ps
}

// emptySum is the BLAKE3 digest of no bytes, the only digest a member of
// size 0 can have.
var emptySum = b3.Of(nil)

// indexed is a problem of member i.
type indexed struct {
	i int
	p Problem
}

// memberProblems checks the digest and the source of a member.
func memberProblems(d *decoded) []Problem {
	var ps []Problem
	add := func(kind, format string, a ...any) {
		ps = append(ps, Problem{Kind: kind, Path: d.path, ID: d.id, Detail: fmt.Sprintf(format, a...)})
	}
	if d.digestRaw {
		_, err := b3.Parse(d.digest)
		add(KindBadMember, "%v", err)
	} else if d.size == 0 && d.sum != emptySum {
		add(KindBadMember, "size 0, but digest %s is not the BLAKE3 of no bytes (%s)", d.sum, emptySum)
	}
	switch {
	case d.hasS3 && d.hasCAS:
		add(KindBadMember, "both an s3 and a cas source")
	case d.hasS3:
		if d.bucket == "" || d.keyEmpty() {
			add(KindBadMember, "s3 source without bucket or key")
		}
		if v := d.versionID; v == "" || v == "null" {
			add(KindUnversioned, "s3://%s/%s has no real version id (%q)", d.bucket, d.key(), v)
		}
	case d.hasCAS:
		if d.casRaw {
			add(KindBadMember, "cas address %s differs from digest %s", d.cas, d.digestString())
		}
	default:
		add(KindBadMember, "no source")
	}
	return ps
}

// checkPaths reports unsafe paths, paths used by an earlier member, and
// paths below a path that is a file.
func (t *Table) checkPaths(add func(i int, kind, format string, a ...any)) {
	var c pathChecker
	for i := range t.byPath() {
		if detail, bad := c.next(t.Path(i)); bad {
			add(i, KindUnsafePath, "%s", detail)
		}
	}
}

// pathChecker checks paths given in path order.
type pathChecker struct {
	// The paths seen that are prefixes of the current one, shortest
	// first: in path order, the paths between a file f and a path below it
	// all start with f, so f is still here when it matters. Each is a
	// prefix of the last, so they are kept as the last one's bytes and
	// their lengths.
	last []byte
	lens []int
}

// next returns the problem of path p, if any.
func (c *pathChecker) next(p string) (detail string, bad bool) {
	for len(c.lens) > 0 {
		n := c.lens[len(c.lens)-1]
		if len(p) >= n && p[:n] == string(c.last[:n]) {
			break
		}
		c.lens = c.lens[:len(c.lens)-1]
	}
	dup := len(c.lens) > 0 && c.lens[len(c.lens)-1] == len(p)
	if err := CheckPath(p); err != nil {
		detail, bad = err.Error(), true
	} else if dup {
		detail, bad = "path used by an earlier member", true
	} else {
		for _, n := range c.lens {
			if len(p) > n && p[n] == '/' {
				detail, bad = fmt.Sprintf("parent %q is also a file", c.last[:n]), true
				break
			}
		}
	}
	if !dup {
		c.last = append(c.last[:0], p...)
		c.lens = append(c.lens, len(p))
	}
	return detail, bad
}

// sortIndexed sorts problems by member, keeping their order for one member.
func sortIndexed(at []indexed) {
	slices.SortStableFunc(at, func(a, b indexed) int { return a.i - b.i })
}

// byPath returns the member indexes in path order; equal paths in table
// order.
func (t *Table) byPath() iter.Seq[int] {
	if t.sorted {
		return func(yield func(int) bool) {
			for i := range t.Len() {
				if !yield(i) {
					return
				}
			}
		}
	}
	order := make([]int, t.Len())
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(t.Path(a), t.Path(b)) })
	return slices.Values(order)
}

// checkIDs reports empty ids and ids used by an earlier member, naming
// the split of the first member with that id.
func (t *Table) checkIDs(add func(i int, kind, format string, a ...any)) {
	var order iter.Seq[int]
	if t.idsArePaths {
		order = t.byPath()
	} else {
		o := make([]int, t.Len())
		for i := range o {
			o[i] = i
		}
		slices.SortStableFunc(o, func(a, b int) int { return strings.Compare(t.ID(a), t.ID(b)) })
		order = slices.Values(o)
	}
	first, firstID := -1, ""
	for i := range order {
		id := t.ID(i)
		switch {
		case id == "":
			add(i, KindBadMember, "empty id")
		case first >= 0 && id == firstID:
			add(i, KindDuplicateID, "id %q already used (split %q, this one %q)", id, t.Split(first), t.Split(i))
		default:
			first, firstID = i, id
		}
	}
}
