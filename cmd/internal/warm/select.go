package warm

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pinfs/pinfs/verify"
)

// ErrSelection is wrapped by every Select error: a PATH or split that
// names no member of the snapshot. It is the caller's mistake, found
// before anything is fetched.
var ErrSelection = errors.New("selects no member")

// Select returns the indexes, in table order, of the members of t that lie
// at or under one of paths and, when split is not "", belong to that
// split. No paths means the whole snapshot. A path is relative to the
// snapshot root; a leading or trailing "/" is accepted, and "/" alone is
// the root. A path that matches no member, or a split that leaves nothing
// of what the paths selected, is an error wrapping ErrSelection that
// names it.
func Select(t *verify.Table, paths []string, split string) ([]int, error) {
	dirs := make([]string, len(paths))
	for i, p := range paths {
		dirs[i] = strings.Trim(p, "/")
	}
	hits := make([]bool, len(dirs))
	var sel []int
	for i := range t.Len() {
		if len(dirs) > 0 && !matchAny(t.Path(i), dirs, hits) {
			continue
		}
		if split == "" || t.Split(i) == split {
			sel = append(sel, i)
		}
	}
	for i, hit := range hits {
		if !hit {
			return nil, fmt.Errorf("%q %w: no member at or under it", paths[i], ErrSelection)
		}
	}
	if split != "" && len(sel) == 0 {
		where := "in the snapshot"
		if len(paths) > 0 {
			where = "at or under " + strings.Join(quoted(paths), ", ")
		}
		return nil, fmt.Errorf("split %q %w: no member of that split %s", split, ErrSelection, where)
	}
	return sel, nil
}

// matchAny reports whether path p is one of dirs or lies under one, and
// marks in hits every dir that matched.
func matchAny(p string, dirs []string, hits []bool) bool {
	ok := false
	for j, d := range dirs {
		if d == "" || p == d || strings.HasPrefix(p, d) && p[len(d)] == '/' {
			hits[j], ok = true, true
		}
	}
	return ok
}

func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
