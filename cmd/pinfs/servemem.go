package main

import (
	"log/slog"

	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/store/memtarget"
	"github.com/pinfs/pinfs/store/pool"
)

// serveMemory sizes pinfs serve's memory (store/memtarget): on the heap,
// what it has loaded, the headroom and the small blocks' share of a
// memory tier of cacheMem (given or not, as memGiven says); in the pool,
// its memory tier, readahead and reserve. It logs the "memory" line and
// returns the pool, which the caller closes after origin.Run. A target
// that leaves no memory tier is refused.
func serveMemory(target, cacheMem int64, memGiven bool, log *slog.Logger) (memtarget.Sizes, *pool.Pool, error) {
	s, err := memtarget.Plan(memtarget.Request{
		Target: target, Heap: memtarget.HeapInUse() + memtarget.Headroom + memtarget.SmallShare(cacheMem),
		Mem: cacheMem, MemSet: memGiven, Readahead: blocks.DefaultReadaheadBudget,
	})
	if err != nil {
		return s, nil, err
	}
	if s.Mem < blocks.BlockSize { // the origin's tier holds the blocks of a run until their URL is asked for
		return s, nil, usagef("pinfs serve needs a memory tier: --cache-mem %s, memory target %s (%s); "+
			"want a larger --memory-target or --cache-mem", memtarget.Size(s.Mem), memtarget.Size(s.Target), s.Source)
	}
	s.Log(log)
	p, err := pool.New(s.Pool)
	return s, p, err
}
