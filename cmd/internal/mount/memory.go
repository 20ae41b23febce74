package mount

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/store/memtarget"
	"github.com/pinfs/pinfs/store/pool"
)

// memoryHeadroom is the memory a mount needs on the Go heap beyond its
// snapshot index and the nodes of its members (memtarget.Headroom: FUSE
// request buffers, goroutine stacks, the Go runtime; not block bytes,
// which live in the pool).
const memoryHeadroom = memtarget.Headroom

// nodeBytes is what go-fuse keeps for each file the kernel has looked up
// (node id tables, the inode, the parent's child entry; about 420 bytes
// measured): a stat walk or an epoch that opens every file grows the heap
// by that much per member, and the limit must leave room for it.
const nodeBytes = 450

// heapNeed returns the Go heap the snapshot loaded so far holds (after a
// collection that gives the parse's garbage back to the OS) and what the
// mount needs on the heap beside its pool: that, a node per member, the
// headroom, and the share of small blocks of a memory tier of cacheMem.
func heapNeed(members int, cacheMem int64) (index, need int64) {
	index = memtarget.HeapInUse()
	return index, index + int64(members)*nodeBytes + memoryHeadroom + memtarget.SmallShare(cacheMem)
}

// planMemory returns how c's memory is shared (memtarget.Plan): heap is
// what the mount needs on the Go heap (heapNeed).
func planMemory(c *Config, heap int64) (memtarget.Sizes, error) {
	r := memtarget.Request{
		Target: c.MemoryTarget, Heap: heap, Mem: max(c.CacheMem, 0), MemSet: c.CacheMemSet,
		Readahead: c.ReadaheadBudget, ReadaheadSet: c.ReadaheadBudgetSet, Self: c.cgroupSelf, Root: c.cgroupRoot,
		NoCgroup: !c.FromCgroup,
	}
	if r.Readahead <= 0 {
		r.Readahead, r.ReadaheadSet = blocks.DefaultReadaheadBudget, false
	}
	return memtarget.Plan(r)
}

// limitMemory sets the Go runtime's soft memory limit to the heap part of
// the mount's memory (s.Heap: the snapshot index, a node per member, the
// headroom and the small blocks' share). Block bytes are in the pool,
// off the heap, so the collector neither counts them nor scans them.
// Without a limit the collector lets the heap grow to twice the live
// data. GOMEMLIMIT, when set, wins.
func limitMemory(s memtarget.Sizes, log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(s.Heap)
	log.Info("memory limit", "bytes", s.Heap)
}

// closePool closes the mount's block pool once its Reader is closed. A
// slot still held (a read of a lazily detached mount that outlived the
// Reader's bounded wait) leaves the pool mapped: logged, not fatal.
func closePool(p *pool.Pool, log *slog.Logger) {
	if err := p.Close(); err != nil {
		log.Warn("closing the block pool", "err", err)
	}
}
