package mount

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// selfMountinfo lists the mounts this process sees.
const selfMountinfo = "/proc/self/mountinfo"

// mountEntry is one line of a mountinfo file.
type mountEntry struct {
	Point  string // the mountpoint, unescaped
	FSType string // e.g. fuse.pinfs
	Source string // e.g. the digest of a pinfs mount
}

// mountAt returns the topmost mount at exactly dir (a canonical path, see
// canonical) listed in the mountinfo file at path. It never touches dir
// itself, which would hang on a hung FUSE daemon.
func mountAt(path, dir string) (mountEntry, bool) {
	f, err := os.Open(path)
	if err != nil {
		return mountEntry{}, false
	}
	defer f.Close()
	return findMount(f, dir)
}

// findMount returns the last mount at exactly dir in the mountinfo r:
// later lines are mounted on top of earlier ones.
func findMount(r io.Reader, dir string) (mountEntry, bool) {
	var found mountEntry
	ok := false
	s := bufio.NewScanner(r)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 10 || unescapeMountinfo(fields[4]) != dir {
			continue
		}
		sep := 6 // optional fields end with "-"; fstype and source follow
		for sep < len(fields) && fields[sep] != "-" {
			sep++
		}
		if sep+2 >= len(fields) {
			continue
		}
		found = mountEntry{Point: dir, FSType: fields[sep+1], Source: unescapeMountinfo(fields[sep+2])}
		ok = true
	}
	return found, ok
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of a
// mountinfo field.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && octal(s[i+1:i+4]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func octal(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}

// canonical returns dir as mountinfo names it: absolute, with symbolic
// links in its parent resolved. The last element is left alone, so that
// dir itself is never looked at (a dead or hung mount).
func canonical(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return filepath.Clean(dir)
	}
	parent, base := filepath.Split(abs)
	if base == "" {
		return abs
	}
	if real, err := filepath.EvalSymlinks(parent); err == nil {
		return filepath.Join(real, base)
	}
	return abs
}
