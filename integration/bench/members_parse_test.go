package bench

import (
	"fmt"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/pinfs/pinfs/verify/verifytest"
)

// memStat is the memory of a process from /proc/<pid>/status, in bytes
// (-1 for a field that is missing).
type memStat struct {
	rss, hwm, anon, file int64 // VmRSS, VmHWM, RssAnon, RssFile
}

// procMem reads pid's memStat.
func procMem(pid int) memStat {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memStat{-1, -1, -1, -1}
	}
	return parseMem(string(b))
}

// parseMem reads the kB fields of a /proc/<pid>/status text.
func parseMem(status string) memStat {
	m := memStat{-1, -1, -1, -1}
	fields := map[string]*int64{"VmRSS": &m.rss, "VmHWM": &m.hwm, "RssAnon": &m.anon, "RssFile": &m.file}
	for _, line := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(line, ":")
		p, want := fields[k]
		if !ok || !want {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 2 && f[1] == "kB" {
			if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				*p = n << 10
			}
		}
	}
	return m
}

// String is the four figures in MB, as a table cell.
func (m memStat) String() string {
	return fmt.Sprintf("VmRSS %s, VmHWM %s (RssAnon %s, RssFile %s)", mb(m.rss), mb(m.hwm), mb(m.anon), mb(m.file))
}

// parseDu reads the output of `du -a -B1 DIR` and returns the bytes of
// the file table (a path as du prints it) and of everything else in DIR
// (its total, the last line, less the table); table is -1 when du did not
// list it (a cache dir that keeps no copy of the table).
func parseDu(out, table string) (tableBytes, rest int64, err error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	tableBytes, total := int64(-1), int64(-1)
	for i, line := range lines {
		size, p, ok := strings.Cut(line, "\t")
		n, perr := strconv.ParseInt(size, 10, 64)
		if !ok || perr != nil {
			return 0, 0, fmt.Errorf("du: line %q is not SIZE<tab>PATH", line)
		}
		if p == table {
			tableBytes = n
		}
		if i == len(lines)-1 {
			total = n
		}
	}
	return tableBytes, total - max(tableBytes, 0), nil
}

// openedRE is run show's consumed line: "consumed  N members opened, …".
var openedRE = regexp.MustCompile(`(?m)^consumed\s+(\d+) members opened`)

// runShowOpened returns the members opened that `pinfs run show
// --members` reports, and how many member lines it lists after its
// PATH header.
func runShowOpened(out string) (opened, listed int, err error) {
	sm := openedRE.FindStringSubmatch(out)
	if sm == nil {
		return 0, 0, fmt.Errorf("no \"consumed  N members opened\" line")
	}
	opened, _ = strconv.Atoi(sm[1])
	_, list, ok := strings.Cut(out, "\nPATH ")
	if !ok {
		return opened, 0, fmt.Errorf("no PATH header of the member list")
	}
	for _, line := range strings.Split(list, "\n")[1:] {
		if strings.TrimSpace(line) != "" {
			listed++
		}
	}
	return opened, listed, nil
}

// treeEntries is what `find MNT | wc -l` counts in a mount of the
// synthetic table of n members: the members, their directories and the
// root. Member i's directory changes only every per members.
func treeEntries(n int) int {
	dirs := map[string]bool{".": true}
	per := max((n+verifytest.Dirs-1)/verifytest.Dirs, 1)
	for i := 0; i < n; i += per {
		for d := path.Dir(verifytest.Path(i, n)); !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	return n + len(dirs)
}

// dirOf returns a directory of the synthetic table of n members (the one
// of member n/3, inside the train split) and how many members it holds:
// all of per, since n/3 is never in the last, short one.
func dirOf(n int) (string, int) {
	per := max((n+verifytest.Dirs-1)/verifytest.Dirs, 1)
	i := n / 3
	return path.Dir(verifytest.Path(i, n)), per
}
