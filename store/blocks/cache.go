package blocks

import (
	"context"
	"errors"

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
// A waiter takes its own reference (waitRef) with TryRetain: a block that
// has left every holder by the time the waiter runs is lost (errLost),
// never reused under it, and get pends the block again.

// errLost: a load's block was released before its waiter took a
// reference; get starts over.
var errLost = errors.New("blocks: block released before its reader took it")

// waitRef waits for c and returns its block with a reference held for the
// caller (pool.Reader).
func waitRef(ctx context.Context, c *lru.Call[*pool.Block]) (*pool.Block, error) {
	b, err := c.Wait(ctx)
	if err != nil {
		return nil, err
	}
	if b == nil || !b.TryRetain(pool.Reader) {
		return nil, errLost
	}
	return b, nil
}

// setCall ends c with b, whose reference the caller holds as from, and
// forgets it as k's call; the call's own reference goes at once.
func (r *Reader) setCall(c *lru.Call[*pool.Block], k cache.Key, b *pool.Block, from pool.Holder) {
	b.Move(from, pool.Call)
	c.Set(b, nil)
	r.calls.Forget(k, c)
	b.Release(pool.Call)
}
