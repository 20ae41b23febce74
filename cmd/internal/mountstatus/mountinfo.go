package mountstatus

import (
	"bufio"
	"io"
	"os"
	"strings"
)

// FSType is the file system type of a pinfs mount in /proc/self/mountinfo.
const FSType = "fuse.pinfs"

// mountinfoPath is read by fsTypeAt; tests point it elsewhere.
var mountinfoPath = "/proc/self/mountinfo"

// fsTypeAt returns the type of the file system mounted last (on top) at
// exactly dir, from /proc/self/mountinfo, or "" when nothing is. It never
// touches dir itself.
func fsTypeAt(dir string) (string, error) {
	f, err := os.Open(mountinfoPath)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return parseMountinfo(f, dir)
}

// parseMountinfo returns the type of the last mount at dir listed in r
// (mountinfo format: field 5 is the mount point, and the type follows the
// "-" separator).
func parseMountinfo(r io.Reader, dir string) (string, error) {
	typ := ""
	s := bufio.NewScanner(r)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 10 || unescape(fields[4]) != dir {
			continue
		}
		sep := 6
		for sep < len(fields) && fields[sep] != "-" {
			sep++
		}
		if sep+1 < len(fields) {
			typ = fields[sep+1]
		}
	}
	return typ, s.Err()
}

// unescape undoes the octal escapes of a mountinfo path (\040 for a
// space, \011, \012, \134).
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

// octal reports whether d is three octal digits of a byte value.
func octal(d string) bool {
	return d[0] >= '0' && d[0] <= '3' && d[1] >= '0' && d[1] <= '7' && d[2] >= '0' && d[2] <= '7'
}
