package blocks

import (
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/b3"
)

// errOutboard marks the errors of loading an outboard.
var errOutboard = errors.New("loading outboard")

// outboardCache keeps recently used outboards in memory, bounded by bytes
// and evicting the least recently used, and loads each at most once at a
// time. It is safe for concurrent use; mu guards everything in it.
type outboardCache struct {
	max     int64
	mu      sync.Mutex
	lru     *list.List // of *obEntry, most recently used first
	index   map[b3.Sum]*list.Element
	bytes   int64
	flights map[obKey]*obFlight
}

type obEntry struct {
	d  b3.Sum
	ob []byte
}

type obKey struct {
	d     b3.Sum
	fresh bool
}

type obFlight struct {
	done chan struct{}
	ob   []byte
	err  error
}

func newOutboardCache(max int64) *outboardCache {
	return &outboardCache{max: max, lru: list.New(), index: make(map[b3.Sum]*list.Element), flights: make(map[obKey]*obFlight)}
}

// smallOutboard returns the outboard of a member of at most b3.GroupSize
// bytes, which pinfs does not store: the 8-byte little-endian size alone.
func smallOutboard(size int64) []byte {
	var ob [8]byte
	binary.LittleEndian.PutUint64(ob[:], uint64(size))
	return ob[:]
}

// outboard returns the outboard of m. With fresh it bypasses every cached
// copy (the Outboards' and this Reader's) and replaces the cached copy with
// what the store holds. Concurrent calls for the same member and freshness
// share one load; transient errors are retried like block fetches. A load
// joined that ran out of its own time is tried again in ctx's. ctx is the
// flight's context (the Reader's, with the read deadline).
func (r *Reader) outboard(ctx context.Context, m *Member, fresh bool) ([]byte, error) {
	if m.Size <= b3.GroupSize {
		return smallOutboard(m.Size), nil
	}
	c := r.obs
	k := obKey{m.Digest, fresh}
	c.mu.Lock()
	if e, ok := c.index[m.Digest]; ok && !fresh {
		c.lru.MoveToFront(e)
		c.mu.Unlock()
		return e.Value.(*obEntry).ob, nil
	}
	if f, ok := c.flights[k]; ok {
		c.mu.Unlock()
		select {
		case <-f.done:
			if errors.Is(f.err, ErrReadTimeout) && ctx.Err() == nil {
				return r.loadOutboard(ctx, m, fresh)
			}
			return f.ob, f.err
		case <-ctx.Done():
			return nil, r.stopped(ctx, nil)
		}
	}
	f := &obFlight{done: make(chan struct{})}
	c.flights[k] = f
	c.mu.Unlock()

	f.ob, f.err = r.loadOutboard(ctx, m, fresh)
	c.mu.Lock()
	if f.err == nil {
		c.putLocked(m.Digest, f.ob)
	}
	delete(c.flights, k)
	c.mu.Unlock()
	close(f.done)
	return f.ob, f.err
}

// loadOutboard asks Outboards for m's outboard and retries as fetch does:
// every failure that may pass (throttling, 5xx, refused or reset
// connections, timeouts) with jittered exponential backoff until ctx's
// deadline (the read timeout), or up to Config.Attempts loads if that is
// set. A permanent store answer or an outboard of the wrong size fails at
// once. Retries wait for the shared limiter, which a throttled answer
// slows down; the first load does not, as it is mostly a local copy.
func (r *Reader) loadOutboard(ctx context.Context, m *Member, fresh bool) ([]byte, error) {
	r.st.outboardLoads.Add(1)
	fail := func(err error) error { return fmt.Errorf("%w %v (fresh %v): %w", errOutboard, m.Digest, fresh, err) }
	for attempt := 1; ; attempt++ {
		ob, err := r.cfg.Outboards.Outboard(ctx, m.Digest, m.Size, fresh)
		if err == nil {
			return ob, nil
		}
		if ctx.Err() != nil {
			return nil, fail(r.stopped(ctx, err))
		}
		if errors.Is(err, store.ErrThrottled) {
			r.lim.throttled()
		}
		if permanent(err) || errors.Is(err, b3.ErrMismatch) || r.cfg.Attempts > 0 && attempt >= r.cfg.Attempts {
			return nil, fail(err)
		}
		r.st.retries.Add(1)
		if serr := r.sleep(ctx, r.backoff(attempt)); serr != nil {
			return nil, fail(r.stopped(ctx, err))
		}
		if serr := r.lim.wait(ctx); serr != nil {
			return nil, fail(r.stopped(ctx, err))
		}
	}
}

// putLocked caches ob as d's outboard and evicts least recently used
// outboards beyond the budget, but never ob itself. c.mu must be held.
func (c *outboardCache) putLocked(d b3.Sum, ob []byte) {
	if e, ok := c.index[d]; ok {
		c.bytes -= int64(len(e.Value.(*obEntry).ob))
		c.lru.Remove(e)
	}
	c.index[d] = c.lru.PushFront(&obEntry{d, ob})
	c.bytes += int64(len(ob))
	for c.bytes > c.max && c.lru.Len() > 1 {
		e := c.lru.Back()
		oe := e.Value.(*obEntry)
		c.lru.Remove(e)
		delete(c.index, oe.d)
		c.bytes -= int64(len(oe.ob))
	}
}
