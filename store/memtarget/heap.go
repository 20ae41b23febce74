package memtarget

import (
	"log/slog"
	"runtime"
	"runtime/debug"
)

// Headroom is the memory a process that reads blocks needs on the Go heap
// beyond what it has loaded: request buffers (FUSE's, HTTP's), goroutine
// stacks, the block reader's bookkeeping, the Go runtime. Block bytes are
// not in it: they live in the pool.
const Headroom = 96 << 20

// SmallShareMax bounds the heap counted for blocks smaller than
// pool.SmallMax, which live on the Go heap rather than in a slot (a small
// member's only block, a member's short last block).
const SmallShareMax = 64 << 20

// SmallShare is the heap counted for the small blocks of a memory tier of
// mem bytes: min(mem, SmallShareMax).
func SmallShare(mem int64) int64 { return min(max(mem, 0), SmallShareMax) }

// HeapInUse returns the Go heap in use now, after a collection that
// gives the garbage of what was just loaded (a parsed member table) back
// to the OS: what a process has loaded before its blocks.
func HeapInUse() int64 {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// Log logs how s shares the memory: one "memory" line (target, source,
// pool, mem, readahead, reserve, heap, the cgroup's limit when it came
// from one, and attrs), and a warning when the explicit flags outgrew the
// target or the cgroup's limit could not be read.
func (s Sizes) Log(log *slog.Logger, attrs ...any) {
	a := []any{"target", s.Target, "source", s.Source, "pool", s.Pool, "mem", s.Mem, "readahead", s.Readahead,
		"reserve", s.Reserve, "heap", s.Heap}
	if s.Limit > 0 {
		a = append(a, "cgroup_limit", s.Limit)
	}
	log.Info("memory", append(a, attrs...)...)
	if s.Over > 0 {
		log.Warn("--cache-mem and --readahead-budget take more than the memory target leaves them: the process may use more",
			"over", s.Over, "target", s.Target)
	}
	if s.Unread != nil {
		log.Warn("the cgroup's memory limit could not be read: the default memory target is used", "err", s.Unread)
	}
}
