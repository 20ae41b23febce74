package blocks

import (
	"context"
	"sync"
	"time"

	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/store/lru"
)

// The readahead budget (Config.ReadaheadBudget) bounds the memory that
// readahead and Warm take beyond the memory tier's own budget: the bytes
// of their runs from the moment they are requested until they are read,
// and the memory tier's front, which keeps them in between.
//
// A third of the budget (held) is for blocks requested ahead and not yet
// read: a run reserves its blocks' bytes before it starts (startRun) and
// each block's bytes come back when the block is read (Slices, Warm), when
// its flight fails, or when the memory tier no longer has it (pushed out
// of the front before its reader came; found by sweep). Readahead that
// finds no room is skipped, not queued: the blocks are asked for again at
// the reader's next read, and a reader's own miss never waits. Warm, which
// must load every block, waits for room instead.
//
// The other two thirds are the front (blocks.New), so that a block read
// ahead stays there until its reader comes while the readers keep pace:
// between a block's arrival and its read, the front takes in at most the
// blocks held at its arrival (read meanwhile) and those requested after
// it (held then too), two helds' worth. Readahead memory, in flight plus
// in the front, is therefore at most held + front = the budget.

// heldShare is the part of the budget for blocks requested and not yet
// read: 1/heldShare.
const heldShare = 3

// sweepEvery is how often Warm, waiting for room, looks for blocks that
// left the memory tier unread.
const sweepEvery = 50 * time.Millisecond

// budget accounts for the blocks that readahead and Warm requested and
// that have not been read yet. Its methods are safe for concurrent use;
// mu guards the fields below it.
type budget struct {
	max int64 // bytes that may be held at once

	mu    sync.Mutex
	used  int64                   // bytes reserved, held by blocks or about to be
	held  map[cache.Key]heldBlock // the blocks reserved, in flight or loaded and unread
	freed chan struct{}           // closed (and replaced) when bytes come back
	inMem func(cache.Key) bool    // reports whether the memory tier has a block
}

// heldBlock is one block's share of the budget, and its call: a block
// whose call ended and that the memory tier no longer has is no longer
// held.
type heldBlock struct {
	n int64
	c *lru.Call[[]byte]
}

func newBudget(max int64, inMem func(cache.Key) bool) *budget {
	return &budget{max: max, held: make(map[cache.Key]heldBlock), freed: make(chan struct{}), inMem: inMem}
}

// take reserves n bytes if they fit, or if nothing is reserved (so that a
// run larger than the whole budget still goes, alone). When they do not
// fit it first sweeps the blocks that left the memory tier unread.
func (b *budget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used > 0 && b.used+n > b.max {
		b.sweep()
		if b.used > 0 && b.used+n > b.max {
			return false
		}
	}
	b.used += n
	return true
}

// hold accounts n of the bytes reserved to block k, loaded by call c. A
// block held already (fetched again after it left the memory tier) keeps
// its first share and the n bytes are given back.
func (b *budget) hold(k cache.Key, n int64, c *lru.Call[[]byte]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.held[k]; ok {
		b.free(n)
		return
	}
	b.held[k] = heldBlock{n: n, c: c}
}

// give returns n reserved bytes that no block holds.
func (b *budget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free(n)
}

// release returns the bytes of block k, if it is held: it was read, or its
// load failed.
func (b *budget) release(k cache.Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h, ok := b.held[k]; ok {
		delete(b.held, k)
		b.free(h.n)
	}
}

// failed releases the blocks of calls whose load failed.
func (b *budget) failed(first int64, calls []*lru.Call[[]byte], k func(int64) cache.Key) {
	for j, c := range calls {
		if c.Failed() {
			b.release(k(first + int64(j)))
		}
	}
}

// sweep releases the blocks whose call ended and that the memory tier no
// longer has: failed, or pushed out before they were read. b.mu is held.
func (b *budget) sweep() {
	for k, h := range b.held {
		if isDone(h.c) && (h.c.Failed() || !b.inMem(k)) {
			delete(b.held, k)
			b.free(h.n)
		}
	}
}

// free returns n bytes and wakes those waiting for room. b.mu is held.
func (b *budget) free(n int64) {
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
}

// wait waits until bytes come back, or sweepEvery has passed (a sweep may
// then find room), or ctx ends.
func (b *budget) wait(ctx context.Context) error {
	b.mu.Lock()
	freed := b.freed
	b.mu.Unlock()
	t := time.NewTimer(sweepEvery)
	defer t.Stop()
	select {
	case <-freed:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// bytes returns the bytes reserved now.
func (b *budget) bytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
