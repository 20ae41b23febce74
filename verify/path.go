package verify

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest path component pinfs serves (Linux NAME_MAX).
const MaxNameLen = 255

// ErrUnsafePath is wrapped by every path rejected by CheckPath.
var ErrUnsafePath = errors.New("unsafe path")

// CheckPath reports whether p is a safe member path: relative, valid UTF-8,
// no control character (C0 U+0000..U+001F, DEL U+007F, C1
// U+0080..U+009F: unicode.IsControl), no empty, "." or ".." component,
// no component over MaxNameLen bytes. Paths use "/" as separator and are
// served as they are.
//
// Control characters are refused because a path is printed and piped as
// it is: a newline splits one member into two lines of `find` or
// `pinfs ls` (`x\n/etc/shadow`), and ESC or CSI sequences rewrite the
// terminal that shows them.
func CheckPath(p string) error {
	bad := func(why string) error { return fmt.Errorf("path %q: %s: %w", p, why, ErrUnsafePath) }
	switch {
	case p == "":
		return bad("empty")
	case !utf8.ValidString(p):
		return bad("not valid UTF-8")
	case strings.HasPrefix(p, "/"):
		return bad("absolute")
	}
	if i := strings.IndexFunc(p, unicode.IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(p[i:])
		return bad(fmt.Sprintf("control character %U at byte %d", r, i))
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

// Printable returns s, or s quoted as a Go string when it holds a control
// character, for text meant for a terminal or a line-based tool. Member
// paths of a checked table hold none, but other fields (ids, splits, S3
// keys, version ids) may, and so may the paths of a refused table.
func Printable(s string) string {
	if strings.ContainsFunc(s, unicode.IsControl) {
		return strconv.Quote(s)
	}
	return s
}
