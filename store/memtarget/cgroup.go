package memtarget

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// The files the process's cgroup is read from on a real system.
const (
	SelfCgroup = "/proc/self/cgroup"
	CgroupRoot = "/sys/fs/cgroup"
)

// The sources FromCgroup names, as the "memory" log line shows them.
const (
	SourceV2 = "cgroup v2 memory.max"
	SourceV1 = "cgroup v1 memory.limit_in_bytes"
)

// v1Unlimited is the least memory.limit_in_bytes that means no limit: an
// unlimited v1 cgroup reports the largest page-aligned int64
// (9223372036854771712), and nothing near 2^62 bytes is a real limit.
const v1Unlimited = 1 << 62

// FromCgroup returns the memory limit of the process's cgroup: self is
// the process's cgroup file (SelfCgroup), root where the cgroup
// hierarchies are mounted (CgroupRoot).
//
// With a cgroup v1 memory controller (a "N:...memory...:/path" line,
// which also wins on a hybrid system, where the memory controller is
// v1's), the limit is root/memory/path/memory.limit_in_bytes; a value of
// 2^62 or more means none. Otherwise, with cgroup v2 (the "0::/path"
// line), it is root/path/memory.max; "max" means none. When root/path
// does not exist, as in a container that sees its own cgroup mounted at
// root but the host's path in self, the file at root is read instead.
// Only the process's own cgroup is read, not its ancestors': a container
// without a limit of its own would otherwise take the limit of every
// pod on the node (kubepods) for its own.
//
// ok is false when no cgroup limits the process: no cgroup file (not
// Linux), no memory controller, or no limit set. err is not nil when a
// file that should hold a limit holds something else.
func FromCgroup(self, root string) (limit int64, source string, ok bool, err error) {
	b, err := os.ReadFile(self)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, fmt.Errorf("memory target: %w", err)
	}
	v1, v2, hasV1, hasV2 := parseSelf(b)
	switch {
	case hasV1:
		limit, ok, err = readLimit(filepath.Join(root, "memory"), v1, "memory.limit_in_bytes", parseV1)
		return limit, SourceV1, ok, err
	case hasV2:
		limit, ok, err = readLimit(root, v2, "memory.max", parseV2)
		return limit, SourceV2, ok, err
	}
	return 0, "", false, nil
}

// parseSelf returns the cgroup paths of /proc/self/cgroup's memory
// controller line (v1) and unified line (v2), and whether each is there.
func parseSelf(b []byte) (v1, v2 string, hasV1, hasV2 bool) {
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		id, rest, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		ctrls, p, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if id == "0" && ctrls == "" {
			v2, hasV2 = p, true
			continue
		}
		for c := range strings.SplitSeq(ctrls, ",") {
			if c == "memory" {
				v1, hasV1 = p, true
			}
		}
	}
	return v1, v2, hasV1, hasV2
}

// readLimit reads name in dir/p, or, when dir/p does not exist, in dir.
func readLimit(dir, p, name string, parse func(string) (int64, bool, error)) (int64, bool, error) {
	d := filepath.Join(dir, filepath.FromSlash(path.Clean("/"+p)))
	if st, err := os.Stat(d); err != nil || !st.IsDir() {
		d = dir
	}
	file := filepath.Join(d, name)
	b, err := os.ReadFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist): // v2's root cgroup has no memory.max
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("memory target: %w", err)
	}
	v, ok, err := parse(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, false, fmt.Errorf("memory target: %s: %w", file, err)
	}
	return v, ok, nil
}

// parseV2 reads a memory.max: bytes, or "max" for none.
func parseV2(s string) (int64, bool, error) {
	if s == "max" {
		return 0, false, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, false, fmt.Errorf("%q is not a memory.max (bytes or \"max\")", s)
	}
	return v, true, nil
}

// parseV1 reads a memory.limit_in_bytes: bytes, 2^62 or more for none.
func parseV1(s string) (int64, bool, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%q is not a memory.limit_in_bytes (bytes)", s)
	}
	if v >= v1Unlimited {
		return 0, false, nil
	}
	return int64(v), true, nil
}
