package blocks

import (
	"context"
	"sync"
	"time"

	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/store/lru"
	"github.com/pinfs/pinfs/store/pool"
	"github.com/pinfs/pinfs/verify/b3"
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
//
// The budget is shared fairly between streams (a member read
// sequentially, or warmed): a stream that holds nothing may always take
// a run, within the budget; one that holds some may take more only up to
// its share, the budget divided by the streams holding room. So 64
// sequential readers each keep a run or more ahead, none starves, and
// none holds the room of the others; a random reader takes no room at
// all (its misses never wait for the budget, only for the pool's
// reserve, which the budget cannot take).
//
// A block loaded ahead is held by its pool Block (pool.Readahead), from
// the moment its load ends (landed) until it is read, fails or goes
// stale.

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

	mu      sync.Mutex
	used    int64                   // bytes reserved, held by blocks or about to be
	streams map[b3.Sum]int64        // bytes reserved per stream (member digest)
	held    map[cache.Key]heldBlock // the blocks reserved, in flight or loaded and unread
	freed   chan struct{}           // closed (and replaced) when bytes come back
}

// heldBlock is one block's share of the budget, and its call, which holds
// the block's bytes once it is loaded.
type heldBlock struct {
	n     int64
	c     *lru.Call[*pool.Block]
	blk   *pool.Block // nil until the load lands
	loose bool        // its room goes to the first run that needs it once loaded
}

func newBudget(max int64) *budget {
	return &budget{max: max, stale: staleAfter, held: make(map[cache.Key]heldBlock),
		streams: make(map[b3.Sum]int64), freed: make(chan struct{})}
}

// take reserves n bytes for stream s if they fit in the budget (or if
// nothing is reserved: a run larger than the whole budget still goes,
// alone) and in s's fair share (fits). When they do not fit it first
// sweeps the blocks that failed or went stale.
func (b *budget) take(s b3.Sum, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.fits(s, n) {
		b.sweep()
		if !b.fits(s, n) {
			return false
		}
	}
	b.used += n
	b.streams[s] += n
	return true
}

// fits reports whether n more bytes for stream s fit: in the budget, and,
// if s holds room already, in its share, the budget divided by the
// streams holding room (s included). b.mu is held.
func (b *budget) fits(s b3.Sum, n int64) bool {
	if b.used > 0 && b.used+n > b.max {
		return false
	}
	mine, ok := b.streams[s]
	if !ok || mine == 0 {
		return true
	}
	return mine+n <= b.max/int64(len(b.streams))
}

// share returns s's fair share of the budget now, in bytes.
func (b *budget) share(s b3.Sum) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := len(b.streams)
	if _, ok := b.streams[s]; !ok {
		k++
	}
	return b.max / int64(k)
}

// hold accounts n of the bytes reserved to block k, loaded by call c;
// loose, the block gives its room to the first take that needs it once
// it is loaded, rather than after staleAfter (a block beyond a reader's
// window, read ahead only because parts are whole). A
// block held already by an older call (one that failed, about to be
// released) gives that call's share back.
func (b *budget) hold(k cache.Key, n int64, c *lru.Call[*pool.Block], loose bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h, ok := b.held[k]; ok {
		b.drop(k, h)
	}
	b.held[k] = heldBlock{n: n, c: c, loose: loose}
}

// landed gives the budget its reference (pool.Readahead) to blk, the block
// k's call c loaded, if the budget holds k for c. The caller holds a
// reference.
func (b *budget) landed(k cache.Key, c *lru.Call[*pool.Block], blk *pool.Block) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h, ok := b.held[k]; ok && h.c == c && h.blk == nil {
		h.blk = blk.Retain(pool.Readahead)
		b.held[k] = h
	}
}

// give returns n bytes reserved for stream s that no block holds.
func (b *budget) give(s b3.Sum, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free(s, n)
}

// release returns the bytes of block k, if it is held (it was read, or
// its load failed), and reports whether it was.
func (b *budget) release(k cache.Key) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.held[k]
	if ok {
		b.drop(k, h)
	}
	return ok
}

// drop forgets held block k, releasing its reference and its room. b.mu
// is held.
func (b *budget) drop(k cache.Key, h heldBlock) {
	delete(b.held, k)
	if h.blk != nil {
		h.blk.Release(pool.Readahead)
	}
	b.free(k.Digest, h.n)
}

// clear drops every held block (Reader.Close).
func (b *budget) clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, h := range b.held {
		b.drop(k, h)
	}
}

// failed releases the blocks of calls whose load failed, block first+j
// loaded by calls[j], unless a newer call holds it.
func (b *budget) failed(first int64, calls []*lru.Call[*pool.Block], k func(int64) cache.Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for j, c := range calls {
		if h, ok := b.held[k(first+int64(j))]; ok && h.c == c && c.Failed() {
			b.drop(k(first+int64(j)), h)
		}
	}
}

// sweep releases the blocks whose load failed, and those loaded and still
// unread that are loose or were requested staleAfter ago or more. b.mu is
// held.
func (b *budget) sweep() {
	for k, h := range b.held {
		if isDone(h.c) && (h.c.Failed() || h.loose || time.Since(h.c.Started()) >= b.stale) {
			b.drop(k, h)
		}
	}
}

// shortStale is how long a block read ahead keeps its slot unread while
// a load waits for one (giveBack).
const shortStale = time.Second

// giveBack drops the blocks whose load failed, the loose ones loaded, and
// those loaded and unread for shortStale: a load waits for a slot, and a
// reader that has not come for its block in that time gives its room to
// one that has.
func (b *budget) giveBack() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, h := range b.held {
		if h.blk != nil && (h.loose || time.Since(h.c.Started()) >= shortStale) || isDone(h.c) && h.c.Failed() {
			b.drop(k, h)
		}
	}
}

// loaded returns block k if the budget holds it, loaded and not read
// yet, with a reference held for the caller (pool.Reader).
func (b *budget) loaded(k cache.Key) (*pool.Block, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.held[k]
	if !ok || h.blk == nil {
		return nil, false
	}
	return h.blk.Retain(pool.Reader), true
}

// free returns n bytes of stream s and wakes those waiting for room. b.mu
// is held.
func (b *budget) free(s b3.Sum, n int64) {
	if b.streams[s] -= n; b.streams[s] <= 0 {
		delete(b.streams, s)
	}
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

// streamCount returns the number of streams holding room now.
func (b *budget) streamCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.streams)
}
