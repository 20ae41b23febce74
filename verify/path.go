package verify

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNameLen is the longest path component pinfs serves (Linux NAME_MAX).
const MaxNameLen = 255

// ErrUnsafePath is wrapped by every path rejected by CheckPath.
var ErrUnsafePath = errors.New("unsafe path")

// CheckPath reports whether p is a safe member path: relative, valid UTF-8,
// no NUL, no empty, "." or ".." component, no component over MaxNameLen
// bytes. Paths use "/" as separator and are served as they are.
func CheckPath(p string) error {
	bad := func(why string) error { return fmt.Errorf("path %q: %s: %w", p, why, ErrUnsafePath) }
	switch {
	case p == "":
		return bad("empty")
	case !utf8.ValidString(p):
		return bad("not valid UTF-8")
	case strings.IndexByte(p, 0) >= 0:
		return bad("contains NUL")
	case strings.HasPrefix(p, "/"):
		return bad("absolute")
	}
	for c := range strings.SplitSeq(p, "/") {
		switch {
		case c == "":
			return bad("empty component")
		case c == "." || c == "..":
			return bad(fmt.Sprintf("%q component", c))
		case len(c) > MaxNameLen:
			return bad(fmt.Sprintf("component longer than %d bytes", MaxNameLen))
		}
	}
	return nil
}
