package blocks

import (
	"context"
	"sync"
	"time"

	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/store/lru"
)

// The readahead budget (Config.ReadaheadBudget) bounds the memory that
// readahead and Warm take beyond the memory tier: the bytes of their runs
// from the moment they are requested until they are read. A run reserves
// its blocks' bytes before it starts (startRun); the budget then holds
// each block's call, and so its bytes once loaded, whatever the memory
// tier does with them, so that no block read ahead is lost before its
// reader comes (memBlock finds it here). A block's bytes come back when
// it is read (Slices, Warm), when its load fails, or, once it has waited
// unread for staleAfter (its reader went away), when take needs room.
// Readahead that finds no room is skipped, not queued: the blocks are
// asked for again at the reader's next read, and a reader's own miss
// never waits. Warm, which must load every block, waits for room instead.

// staleAfter is how long a block read ahead keeps its room unread while
// others need it: a reader that stopped, or jumped, leaves its window
// behind.
const staleAfter = 10 * time.Second

// sweepEvery is how often Warm, waiting for room, looks again.
const sweepEvery = 50 * time.Millisecond

// budget accounts for the blocks that readahead and Warm requested and
// that have not been read yet. Its methods are safe for concurrent use;
// mu guards the fields below it.
type budget struct {
	max   int64         // bytes that may be held at once
	stale time.Duration // staleAfter

	mu    sync.Mutex
	used  int64                   // bytes reserved, held by blocks or about to be
	held  map[cache.Key]heldBlock // the blocks reserved, in flight or loaded and unread
	freed chan struct{}           // closed (and replaced) when bytes come back
}

// heldBlock is one block's share of the budget, and its call, which holds
// the block's bytes once it is loaded.
type heldBlock struct {
	n     int64
	c     *lru.Call[[]byte]
	loose bool // its room goes to the first run that needs it once loaded
}

func newBudget(max int64) *budget {
	return &budget{max: max, stale: staleAfter, held: make(map[cache.Key]heldBlock), freed: make(chan struct{})}
}

// take reserves n bytes if they fit, or if nothing is reserved (so that a
// run larger than the whole budget still goes, alone). When they do not
// fit it first sweeps the blocks that failed or went stale.
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

// hold accounts n of the bytes reserved to block k, loaded by call c;
// loose, the block gives its room to the first take that needs it once
// it is loaded, rather than after staleAfter (a block beyond a reader's
// window, read ahead only because parts are whole). A
// block held already by an older call (one that failed, about to be
// released) gives that call's share back.
func (b *budget) hold(k cache.Key, n int64, c *lru.Call[[]byte], loose bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h, ok := b.held[k]; ok {
		b.free(h.n)
	}
	b.held[k] = heldBlock{n: n, c: c, loose: loose}
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

// release returns the bytes of block k, if it is held (it was read, or
// its load failed), and reports whether it was.
func (b *budget) release(k cache.Key) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.held[k]
	if ok {
		delete(b.held, k)
		b.free(h.n)
	}
	return ok
}

// failed releases the blocks of calls whose load failed, block first+j
// loaded by calls[j], unless a newer call holds it.
func (b *budget) failed(first int64, calls []*lru.Call[[]byte], k func(int64) cache.Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for j, c := range calls {
		if h, ok := b.held[k(first+int64(j))]; ok && h.c == c && c.Failed() {
			delete(b.held, k(first+int64(j)))
			b.free(h.n)
		}
	}
}

// sweep releases the blocks whose load failed, and those loaded and still
// unread that are loose or were requested staleAfter ago or more. b.mu is
// held.
func (b *budget) sweep() {
	for k, h := range b.held {
		if isDone(h.c) && (h.c.Failed() || h.loose || time.Since(h.c.Started()) >= b.stale) {
			delete(b.held, k)
			b.free(h.n)
		}
	}
}

// loaded returns block k's bytes if the budget holds it, loaded and not
// read yet.
func (b *budget) loaded(k cache.Key) ([]byte, bool) {
	b.mu.Lock()
	h, ok := b.held[k]
	b.mu.Unlock()
	if !ok || !isDone(h.c) || h.c.Failed() {
		return nil, false
	}
	v, _ := h.c.Wait(context.Background()) // ended: returns at once
	return v, true
}

// free returns n bytes and wakes those waiting for room. b.mu is held.
func (b *budget) free(n int64) {
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
}

// wait waits until bytes come back, or sweepEvery has passed (a block may
// have gone stale), or ctx ends.
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
