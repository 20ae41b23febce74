package mount

import (
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/pinfs/pinfs/store/storetest"

	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/store/memtarget"
)

// restoreMemoryLimit puts back the runtime's memory limit of before the
// test.
func restoreMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
}

// TestLimitMemory: the Go soft limit is the heap part of the mount's
// memory, not its block pool.
func TestLimitMemory(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "") // unset for limitMemory
	restoreMemoryLimit(t)
	debug.SetMemoryLimit(math.MaxInt64)
	s, err := memtarget.Split(1<<30, 200<<20+12345)
	if err != nil {
		t.Fatal(err)
	}
	lines := storetest.LogLines(t, func(l *slog.Logger) { limitMemory(s, l) })
	got := debug.SetMemoryLimit(-1)
	if got != s.Heap {
		t.Errorf("memory limit %d, want the heap part %d (target %d, pool %d)", got, s.Heap, s.Target, s.Pool)
	}
	if len(lines) != 1 || int64(lines[0]["bytes"].(float64)) != got {
		t.Errorf("log %v, want one line with the limit %d", lines, got)
	}
}

func TestLimitMemoryGOMEMLIMITWins(t *testing.T) {
	restoreMemoryLimit(t)
	t.Setenv("GOMEMLIMIT", "3GiB")
	const set = 3 << 30 // what the runtime would have read from GOMEMLIMIT at start
	debug.SetMemoryLimit(set)
	s, err := memtarget.Split(1<<30, 200<<20)
	if err != nil {
		t.Fatal(err)
	}
	if lines := storetest.LogLines(t, func(l *slog.Logger) { limitMemory(s, l) }); lines != nil {
		t.Errorf("limitMemory logged %v with GOMEMLIMIT set", lines)
	}
	if got := debug.SetMemoryLimit(-1); got != set {
		t.Errorf("memory limit %d with GOMEMLIMIT set, want it left at %d", got, set)
	}
}

// TestHeapNeed: what the mount needs on the heap is the loaded heap, a
// node per member, the headroom and the small blocks' share.
func TestHeapNeed(t *testing.T) {
	for _, tc := range []struct {
		members  int
		cacheMem int64
		small    int64
	}{
		{1_000_000, 256 << 20, memtarget.SmallShareMax},
		{7, 16 << 20, 16 << 20},
		{0, 0, 0},
		{0, -1, 0},
	} {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		index, need := heapNeed(tc.members, tc.cacheMem)
		if index <= 0 || index > 2*int64(before.HeapAlloc)+(16<<20) {
			t.Errorf("index heap %d, heap before the call %d", index, before.HeapAlloc)
		}
		if want := index + int64(tc.members)*nodeBytes + memoryHeadroom + tc.small; need != want {
			t.Errorf("heapNeed(%d, %d) = %d; want index %d + %d × %d + headroom %d + small %d = %d",
				tc.members, tc.cacheMem, need, index, tc.members, nodeBytes, memoryHeadroom, tc.small, want)
		}
	}
}

// cgroupV2 makes a cgroup v2 fixture with memory.max limit (a number or
// "max") and points c at it.
func cgroupV2(t *testing.T, c *Config, limit string) {
	t.Helper()
	dir := t.TempDir()
	c.cgroupSelf, c.cgroupRoot = filepath.Join(dir, "self"), filepath.Join(dir, "root")
	if err := os.WriteFile(c.cgroupSelf, []byte("0::/pod\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(c.cgroupRoot, "pod"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.cgroupRoot, "pod", "memory.max"), []byte(limit+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPlanMemory: the mount's flags as memtarget sees them.
func TestPlanMemory(t *testing.T) {
	const heap = 150 << 20
	const gib2 = 2 << 30
	for _, tc := range []struct {
		name   string
		c      Config
		cgroup string
		source string
		target int64
		mem    int64
		ra     int64
	}{
		{"no cgroup: today's defaults", Config{CacheMem: 256 << 20, FromCgroup: true}, "max", "default",
			heap + 256<<20 + blocks.DefaultReadaheadBudget + blocks.PoolReserve, 256 << 20, blocks.DefaultReadaheadBudget},
		{"a 2 GiB cgroup", Config{CacheMem: 256 << 20, ReadaheadBudget: blocks.DefaultReadaheadBudget, FromCgroup: true}, "2147483648",
			memtarget.SourceV2, gib2 / 100 * memtarget.CgroupShare, -1, -1},
		{"a cgroup, not read without FromCgroup (derive)", Config{CacheMem: 128 << 20}, "2147483648", "default",
			heap + 128<<20 + blocks.DefaultReadaheadBudget + blocks.PoolReserve, 128 << 20, blocks.DefaultReadaheadBudget},
		{"--memory-target", Config{MemoryTarget: 1 << 30, CacheMem: 256 << 20, FromCgroup: true}, "2147483648", "flag", 1 << 30, -1, -1},
		{"--memory-target and --cache-mem", Config{MemoryTarget: 1 << 30, CacheMem: 100 << 20, CacheMemSet: true, FromCgroup: true},
			"max", "flag", 1 << 30, 100 << 20, -1},
		{"--memory-target and --readahead-budget", Config{MemoryTarget: 1 << 30, CacheMem: 256 << 20, ReadaheadBudget: 8 << 20,
			ReadaheadBudgetSet: true, FromCgroup: true}, "max", "flag", 1 << 30, -1, 8 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cgroupV2(t, &tc.c, tc.cgroup)
			s, err := planMemory(&tc.c, heap)
			if err != nil {
				t.Fatal(err)
			}
			if s.Source != tc.source || s.Target != tc.target || s.Heap != heap {
				t.Errorf("source %q target %d heap %d; want %q %d %d", s.Source, s.Target, s.Heap, tc.source, tc.target, heap)
			}
			if tc.mem >= 0 && s.Mem != tc.mem || tc.ra >= 0 && s.Readahead != tc.ra {
				t.Errorf("mem %d readahead %d; want %d %d (-1: the split's)", s.Mem, s.Readahead, tc.mem, tc.ra)
			}
			if s.Pool != s.Mem+s.Readahead+s.Reserve || s.Heap+s.Pool > s.Target {
				t.Errorf("sizes %+v do not add up", s)
			}
		})
	}
}
