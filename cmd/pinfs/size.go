package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/store/blocks"
)

// byteSize is a pflag.Value for sizes such as 512MiB, 2G, 10GiB or 0.
// K, M, G and T are binary multiples, with or without "iB".
type byteSize int64

func (s *byteSize) String() string {
	v := int64(*s)
	for i := 3; i >= 0 && v != 0; i-- {
		if shift := 10 * uint(i+1); v%(1<<shift) == 0 {
			return fmt.Sprintf("%d%ciB", v>>shift, "KMGT"[i])
		}
	}
	return strconv.FormatInt(v, 10)
}

func (s *byteSize) Set(text string) error {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(text), "B"), "i")
	shift := uint(0)
	if n := len(t); n > 0 {
		if i := strings.IndexByte("KMGT", t[n-1]&^0x20); i >= 0 {
			shift = 10 * uint(i+1)
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > (1<<62)>>shift {
		return fmt.Errorf("%q is not a size like 512MiB, 2G or 0", text)
	}
	*s = byteSize(v << shift)
	return nil
}

func (s *byteSize) Type() string { return "size" }

// readahead is the readahead tuning that pinfs mount and pinfs warm share
// (--readahead-max, --readahead-budget; blocks.Config).
type readahead struct{ max, budget byteSize }

// readaheadFlags defines --readahead-max and --readahead-budget on fs.
func readaheadFlags(fs *pflag.FlagSet) *readahead {
	ra := &readahead{max: blocks.DefaultReadaheadMax, budget: blocks.DefaultReadaheadBudget}
	fs.Var(&ra.max, "readahead-max", "largest readahead window `SIZE` of a sequential reader (it starts at one 1 MiB block and doubles "+
		"while the reader goes on; fetched as parallel 8 MiB requests; 0 disables readahead)")
	fs.Var(&ra.budget, "readahead-budget", "memory `SIZE` for all readahead of the process, on top of --cache-mem: blocks requested "+
		"ahead and not yet read, in flight or waiting for their reader; readahead that does not fit is skipped. "+
		"Default: half the memory target's block pool, at most 256MiB (see --memory-target); given, it wins for its part")
	return ra
}

// memoryTarget is --memory-target, which pinfs mount, warm and serve
// share (store/memtarget), and the flag set that tells whether
// --cache-mem and --readahead-budget were given.
type memoryTarget struct {
	target byteSize
	fs     *pflag.FlagSet
}

// memoryTargetFlag defines --memory-target on fs. Define --cache-mem and
// --readahead-budget first, where the command has them: the help names
// those it finds.
func memoryTargetFlag(fs *pflag.FlagSet) *memoryTarget {
	m := &memoryTarget{fs: fs}
	var parts []string
	for _, name := range []string{"cache-mem", "readahead-budget"} {
		if fs.Lookup(name) != nil {
			parts = append(parts, "--"+name)
		}
	}
	overrides := ""
	switch len(parts) {
	case 1:
		overrides = " " + parts[0] + " given explicitly wins for its part"
	case 2:
		overrides = " " + strings.Join(parts, " and ") + " given explicitly win for their part"
	}
	fs.Var(&m.target, "memory-target", "memory `SIZE` the process may use (e.g. 2GiB): its heap and a pool of block memory shared "+
		"by the memory tier, readahead and the blocks of reads in flight. Default: 80% of the memory.max (cgroup v2) or "+
		"memory.limit_in_bytes (cgroup v1) of the cgroup that limits the process (a sidecar's, a CSI mount pod's), else the "+
		"sum of the old defaults (docs/mount.md, Memory)."+overrides)
	return m
}

// value returns the target in bytes (0: not given), or a usage error.
func (m *memoryTarget) value() (int64, error) {
	if m.fs.Changed("memory-target") && m.target == 0 {
		return 0, usagef("--memory-target 0: want a size such as 2GiB (leave it out for the default)")
	}
	return int64(m.target), nil
}

// given reports whether the flag name was given explicitly.
func (m *memoryTarget) given(name string) bool { return m.fs.Changed(name) }

// values returns the flags as blocks.Config's ReadaheadMax and
// ReadaheadBudget, or a usage error.
func (ra *readahead) values() (maxBytes, budget int64, err error) {
	if ra.budget < blocks.BlockSize {
		return 0, 0, usagef("--readahead-budget %v: want at least 1MiB", &ra.budget)
	}
	maxBytes = int64(ra.max)
	if maxBytes == 0 {
		maxBytes = -1 // disabled
	}
	return maxBytes, int64(ra.budget), nil
}
