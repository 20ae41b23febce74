package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// gctraceEnv makes a daemon print one line per collection to its log
// (GODEBUG=gctrace=1: "gc N @Ts P%: ..."), which gcCycles counts.
const gctraceEnv = "GODEBUG=gctrace=1"

// gcLineRE is a gctrace line: "gc 12 @3.456s 4%: ...".
var gcLineRE = regexp.MustCompile(`(?m)^gc (\d+) @`)

// gcCycles returns the number of the last collection a gctrace log shows
// (the runtime numbers them from 1), 0 when it shows none: the cycles
// between two reads of the same log are the difference.
func gcCycles(log string) int {
	all := gcLineRE.FindAllStringSubmatch(log, -1)
	if len(all) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(all[len(all)-1][1])
	return n
}

// memBound is the memory a mount says it keeps to, from its log.
type memBound struct {
	bytes int64
	what  string // how the row names it
}

// The mount's memory lines, text (slog's key=value) or JSON: issue 38's
// "memory" line (target=BYTES, its --memory-target) and, before it, the
// Go soft limit's "memory limit" line (bytes=BYTES).
var (
	memTargetRE = regexp.MustCompile(`(?:\bmsg=memory\b|"msg":"memory").*?(?:\btarget=|"target":)(\d+)`)
	memLimitRE  = regexp.MustCompile(`(?:\bmsg="memory limit"|"msg":"memory limit").*?(?:\bbytes=|"bytes":)(\d+)`)
)

// memoryBound returns the memory target a mount's log names (the
// "memory" line of issue 38's --memory-target), else the Go soft memory
// limit it logs ("memory limit"); false when it logs neither.
func memoryBound(log string) (memBound, bool) {
	if m := memTargetRE.FindAllStringSubmatch(log, -1); m != nil {
		n, err := strconv.ParseInt(m[len(m)-1][1], 10, 64)
		if err == nil {
			return memBound{n, fmt.Sprintf("memory target %s (the mount's \"memory\" log line)", mb(n))}, true
		}
	}
	if m := memLimitRE.FindAllStringSubmatch(log, -1); m != nil {
		n, err := strconv.ParseInt(m[len(m)-1][1], 10, 64)
		if err == nil {
			return memBound{n, fmt.Sprintf("Go memory limit %s (\"memory limit\" log line; this pinfs logs no memory target)", mb(n))}, true
		}
	}
	return memBound{}, false
}

// fullLog returns the whole of the background daemon's logs (daemonLog
// keeps the tail).
func (m *mount) fullLog() string {
	files, _ := filepath.Glob(filepath.Join(m.cache, "logs", "*.log"))
	var sb strings.Builder
	for _, f := range files {
		b, _ := os.ReadFile(f)
		sb.Write(b)
	}
	return sb.String()
}

// mountHas reports whether `pinfs mount --help` names flag.
func (b *bench) mountHas(flag string) bool {
	r := run(time.Minute, nil, b.bin, "mount", "--help")
	return strings.Contains(r.stdout+r.stderr, flag+" ")
}
