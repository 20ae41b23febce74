package pin

import (
	"fmt"
	"slices"
	"strings"
)

// DefaultSplits are the first path components the default split rule
// recognises.
var DefaultSplits = []string{"test", "train", "val", "validation"}

// SplitRule decides a member's split from its path.
type SplitRule struct {
	names []string // sorted; nil means no splits
}

// ParseSplitRule parses a --split value:
//
//	dir          the first path component when it is train, val, validation or test
//	dir:a,b,...  the first path component when it is one of the names given
//	none         no splits
func ParseSplitRule(s string) (SplitRule, error) {
	switch {
	case s == "none":
		return SplitRule{}, nil
	case s == "dir" || s == "":
		return SplitRule{names: DefaultSplits}, nil
	case strings.HasPrefix(s, "dir:"):
		var names []string
		for n := range strings.SplitSeq(strings.TrimPrefix(s, "dir:"), ",") {
			if n == "" || strings.Contains(n, "/") {
				return SplitRule{}, fmt.Errorf("--split %q: split names must be non-empty and contain no '/'", s)
			}
			names = append(names, n)
		}
		slices.Sort(names)
		return SplitRule{names: slices.Compact(names)}, nil
	}
	return SplitRule{}, fmt.Errorf("--split %q: want dir, dir:NAME,NAME... or none", s)
}

// Split returns the split of path.
func (r SplitRule) Split(path string) string {
	first, _, ok := strings.Cut(path, "/")
	if ok && slices.Contains(r.names, first) {
		return first
	}
	return ""
}

// String returns the rule in the canonical form recorded as splitPolicy.
func (r SplitRule) String() string {
	if r.names == nil {
		return "none"
	}
	return "dir:" + strings.Join(r.names, ",")
}
