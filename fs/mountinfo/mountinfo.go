// Package mountinfo reads the kernel's mount table, /proc/self/mountinfo,
// without ever touching the mountpoint itself: a stat or statfs of a FUSE
// mount whose daemon is hung would hang with it.
//
// Each line of the table is
//
//	36 35 0:52 / /mnt/a\040b ro,nosuid shared:1 master:2 - fuse.pinfs sha256:ab ro,user_id=0
//
// fields separated by single spaces: mount id, parent id, major:minor, root,
// mount point, mount options, any number of optional fields ended by "-",
// then the file system type, the source and the super block options. Paths
// escape a space, tab, newline and backslash as \040, \011, \012 and \134.
// A later line is mounted on top of an earlier one at the same point.
package mountinfo

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Self is the mount table of the calling process.
const Self = "/proc/self/mountinfo"

// Entry is one mount of the table.
type Entry struct {
	Point  string // the mount point, unescaped
	FSType string // e.g. fuse.pinfs
	Source string // unescaped; the digest of a pinfs mount
	Minor  string // the device minor; of a FUSE mount, its connection number in /sys/fs/fuse/connections
	// UserID is the user_id= of the super block options, "" when there is
	// none: of a FUSE mount, the uid of the process that mounted it, which
	// the kernel records (fusermount passes the caller's own and refuses a
	// user_id= from the user).
	UserID string
}

// At returns the topmost mount at exactly dir (a canonical path, see
// Canonical) in Self, and false when there is none or the table cannot
// be read.
func At(dir string) (Entry, bool) {
	e, ok, _ := AtFile(Self, dir)
	return e, ok
}

// AtFile is At with the table read from the file at path (a test's fake
// table), and the error of reading it.
func AtFile(path, dir string) (Entry, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return Entry{}, false, err
	}
	defer f.Close()
	return Parse(f, dir)
}

// Parse returns the last mount at exactly dir listed in the table r:
// later lines are mounted on top of earlier ones. Lines too short to be
// a mount are skipped. On a read error it returns what it found before,
// and the error.
func Parse(r io.Reader, dir string) (Entry, bool, error) {
	var found Entry
	ok := false
	s := bufio.NewScanner(r)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		if e, is := parseLine(s.Text()); is && e.Point == dir {
			found, ok = e, true
		}
	}
	return found, ok, s.Err()
}

// All returns every mount of the table at path (Self for this process),
// in the table's order: later entries are mounted on top of earlier ones.
func All(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var all []Entry
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		if e, is := parseLine(s.Text()); is {
			all = append(all, e)
		}
	}
	return all, s.Err()
}

// parseLine parses one line of the table; false when it is not a mount.
// The fields are split on single spaces, so that an empty source (which
// the kernel prints as nothing) does not shift the fields after it.
func parseLine(line string) (Entry, bool) {
	fields := strings.Split(line, " ")
	if len(fields) < 10 {
		return Entry{}, false
	}
	sep := 6 // the optional fields end with "-"; the type and source follow
	for sep < len(fields) && fields[sep] != "-" {
		sep++
	}
	if sep+2 >= len(fields) {
		return Entry{}, false
	}
	_, minor, _ := strings.Cut(fields[2], ":")
	e := Entry{
		Point:  unescape(fields[4]),
		FSType: fields[sep+1],
		Source: unescape(fields[sep+2]),
		Minor:  minor,
	}
	if sep+3 < len(fields) {
		for _, o := range strings.Split(fields[sep+3], ",") {
			if v, ok := strings.CutPrefix(o, "user_id="); ok {
				e.UserID = v
			}
		}
	}
	return e, true
}

// unescape undoes the octal escapes of a field (\040 for a space, \011,
// \012, \134); a backslash not followed by three octal digits of a byte
// is left alone.
func unescape(s string) string {
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

// octal reports whether d is three octal digits of a byte value (\000 to
// \377).
func octal(d string) bool {
	return d[0] >= '0' && d[0] <= '3' && d[1] >= '0' && d[1] <= '7' && d[2] >= '0' && d[2] <= '7'
}

// Canonical returns dir as the table names it: absolute, with symbolic
// links in its parent resolved. The last element is left alone, so that
// dir itself is never looked at (it may be a dead or hung mount).
func Canonical(dir string) string {
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
