package blocks

import (
	"context"
	"errors"
	"sync"

	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/store/lru"
	"github.com/pinfs/pinfs/store/pool"
)

// complete hands a loaded block to the memory tier, which finds it at
// once, and to the budget if it was read ahead, then to its call's
// waiters (the call is forgotten after the tiers have the block, so that a
// reader who arrives in between joins it instead of fetching again), and
// last to the disk tier's queue, which may wait for room. A block that
// loads is no longer remembered as failed (Reader.fails).
func (r *Reader) complete(ru *run, i int64, b *pool.Block, src source, err error) {
	k := key(&ru.m, i)
	c := ru.calls[i-ru.first]
	if err != nil {
		c.Set(nil, err)
		r.calls.Forget(k, c)
		return
	}
	if src != fromMem {
		r.mem.Put(k, b)
	}
	r.fails.forget(k)
	r.budget.landed(k, c, b)
	if i == ru.owner && ru.handoff != nil {
		ru.handoff.give(b)
	}
	// The waiters go first; the disk tier's queue, which may wait for
	// room, after, while the flight still holds the block.
	b.Move(pool.Flight, pool.Call)
	c.Set(b, nil)
	r.calls.Forget(k, c)
	if src == fromNetwork && ru.disk && !(r.cfg.LocalCAS && ru.m.Object.CAS != "") {
		_ = r.disk.PutBlock(k, ru.m.Size, b) // best effort: the tier counts and logs a failure
	}
	b.Release(pool.Call)
}

// A block's load is a call of r.calls whose result is a pool Block. The
// call holds one reference to it (pool.Call) from Set until the call is
// forgotten, just after: by then the block is in the memory tier's front
// (which keeps the last blocks loaded), in the budget if it was read
// ahead and in the disk tier's queue, each with a reference of its own.
// The read that started the run gets its reference from the run's
// handoff; any other waiter takes its own (waitPending) with TryRetain: a block that
// has left every holder by the time the waiter runs is lost (errLost),
// never reused under it, and get pends the block again.

// handoff is the reference a run keeps for the read that started it: the
// block that read missed goes to it whatever the tiers do meanwhile, so
// that it is never lost between the flight and its reader, however many
// other blocks pass through the memory tier before the reader runs.
type handoff struct {
	mu   sync.Mutex
	b    *pool.Block // held (pool.Reader) until taken
	gone bool        // taken, or the read went away: give keeps nothing
}

// give keeps a reference to b for the read, unless it has gone.
func (h *handoff) give(b *pool.Block) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.gone {
		h.b = b.Retain(pool.Reader)
	}
}

// take returns the reference kept for the read, if any, and closes h.
func (h *handoff) take() *pool.Block {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gone = true
	b := h.b
	h.b = nil
	return b
}

// drop closes h, releasing a reference kept and not taken.
func (h *handoff) drop() {
	if b := h.take(); b != nil {
		b.Release(pool.Reader)
	}
}

// waitPending waits for pd's call and returns its block with a reference
// held for the caller (pool.Reader): the one kept by pd's handoff, if the
// read started the run, or else one taken with TryRetain.
func waitPending(ctx context.Context, pd pending) (*pool.Block, error) {
	v, err := pd.c.Wait(ctx)
	if pd.h != nil {
		if b := pd.h.take(); b != nil {
			if err == nil {
				return b, nil
			}
			b.Release(pool.Reader)
		}
	}
	if err != nil {
		return nil, err
	}
	if v == nil || !v.TryRetain(pool.Reader) {
		return nil, errLost
	}
	return v, nil
}

// errLost: a load's block was released before its waiter took a
// reference; get starts over.
var errLost = errors.New("blocks: block released before its reader took it")

// setCall ends c with b, whose reference the caller holds as from, and
// forgets it as k's call; the call's own reference goes at once.
func (r *Reader) setCall(c *lru.Call[*pool.Block], k cache.Key, b *pool.Block, from pool.Holder) {
	b.Move(from, pool.Call)
	c.Set(b, nil)
	r.calls.Forget(k, c)
	b.Release(pool.Call)
}
