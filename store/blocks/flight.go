package blocks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/store/lru"
	"github.com/pinfs/pinfs/store/pool"
	"github.com/pinfs/pinfs/verify/b3"
)

// A miss is one flight over a run of blocks of one member (a single block
// is a run of one): the run's blocks each have a call in r.calls, which
// readers join; one goroutine makes one ranged request for the run,
// verifies each block as its last byte arrives and completes its call at
// once. A block whose copy fails verification, a block the run holds
// without requesting (the disk tier has it) and a run whose outboard
// cannot be loaded are settled on their own (load, fromNetwork, failed).

// source says where a loaded block came from.
type source int

const (
	fromMem source = iota
	fromDisk
	fromNetwork
)

// runKind says who started a run.
type runKind int

const (
	runRead  runKind = iota // a read that missed
	runAhead                // readahead: needs room in the budget, and is not a join
	runWarm                 // Warm: needs room in the budget too
)

// run is one flight: blocks first, first+1, ... of m, one per call, of
// which q0..q1 are requested from the store (none if q0 > q1) and the
// rest load alone. It ends by deadline. disk says whether blocks fetched
// from the store go to the disk tier.
type run struct {
	m        Member // a copy: the caller's may change
	first    int64
	calls    []*lru.Call[*pool.Block]
	q0, q1   int64
	deadline time.Time
	disk     bool
	owner    int64    // the block of the read that started the run (runRead)
	handoff  *handoff // that read's reference to it (cache.go); nil for other runs
}

// startRun returns the calls of the run that block i of m belongs to and
// the index of its first block. If i has a call in flight it joins it (a
// run of one); if the memory tier has i, the call ends at once with it.
// Otherwise it starts a flight over i and the blocks around it within
// lo..hi that have no call and are in neither tier, asking the store for
// them in one request (a block the disk tier holds is loaded alone). A
// readahead or Warm run first reserves room for lo..hi in the budget and
// keeps it for the blocks it loads, those after hold loosely (budget.hold):
// without room startRun returns nil.
// The run ends ReadTimeout after start (the read's start; zero: from
// now). A read's run (runRead) that startRun starts also returns the
// handoff that keeps block i for that read: the caller must take it
// (waitPending) or drop it.
func (r *Reader) startRun(m *Member, i, lo, hi, hold int64, kind runKind, disk bool, start time.Time) ([]*lru.Call[*pool.Block], int64, *handoff) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return []*lru.Call[*pool.Block]{lru.Finished[*pool.Block](nil, ErrClosed)}, i, nil
	}
	r.wg.Add(1)
	r.mu.Unlock()
	var reserved int64 // bytes of the budget not yet held by a block
	switch {
	case kind != runRead:
		reserved = runBytes(m, lo, hi)
		if !r.budget.take(m.Digest, reserved) {
			r.wg.Done()
			return nil, i, nil
		}
	case hi > i:
		// The blocks a miss's run brings beyond i are read ahead of
		// their reader: the budget keeps them, as readahead's, or the
		// memory tier may push them out before their reader comes (with
		// many readers, their runs alone outgrow it) and they are
		// fetched twice. Without room the run is i alone.
		if reserved = runBytes(m, i+1, hi); !r.budget.take(m.Digest, reserved) {
			reserved, hi = 0, i
		}
	}
	c, own, onDisk := r.take(m, i)
	if !own || isDone(c) { // joined, or i was in memory
		switch {
		case kind == runAhead:
		case !own:
			r.st.joined.Add(1)
		default:
			r.st.memHits.Add(1) // served from the call take ended
		}
		r.budget.give(m.Digest, reserved)
		r.wg.Done()
		return []*lru.Call[*pool.Block]{c}, i, nil
	}
	if start.IsZero() {
		start = c.Started()
	}
	ru := &run{m: *m, first: i, calls: []*lru.Call[*pool.Block]{c}, q0: i, q1: i,
		deadline: start.Add(r.cfg.ReadTimeout), disk: disk}
	if onDisk {
		ru.q0, ru.q1 = i+1, i // load it alone; no run around it
	} else {
		for j := i - 1; j >= lo; j-- {
			cj, own, onDisk := r.take(m, j)
			if !own || isDone(cj) {
				break
			}
			ru.calls = append([]*lru.Call[*pool.Block]{cj}, ru.calls...)
			ru.first = j
			if onDisk {
				break
			}
			ru.q0 = j
		}
		for j := i + 1; j <= hi; j++ {
			cj, own, onDisk := r.take(m, j)
			if !own || isDone(cj) {
				break
			}
			ru.calls = append(ru.calls, cj)
			if onDisk {
				break
			}
			ru.q1 = j
		}
	}
	if kind == runRead {
		ru.owner, ru.handoff = i, new(handoff)
	}
	if kind == runRead && reserved == 0 {
		go r.fly(ru)
		return ru.calls, ru.first, ru.handoff
	}
	if kind == runAhead {
		r.st.readaheads.Add(1)
	}
	for j, cj := range ru.calls {
		b := ru.first + int64(j)
		if kind == runRead && b <= i {
			continue // the read's own, or behind it
		}
		_, n := blockRange(m, b)
		r.budget.hold(key(m, b), n, cj, b > hold)
		reserved -= n
	}
	r.budget.give(m.Digest, reserved)
	go func() {
		r.fly(ru)
		r.budget.failed(ru.first, ru.calls, func(i int64) cache.Key { return key(&ru.m, i) })
	}()
	return ru.calls, ru.first, ru.handoff
}

// runBytes returns the bytes of blocks lo..hi of m.
func runBytes(m *Member, lo, hi int64) int64 {
	off, _ := blockRange(m, lo)
	end, n := blockRange(m, hi)
	return end + n - off
}

// take starts the call of block j of m for a run. own is false if j has a
// call in flight already (c is that call). A block the memory tier has
// ends its call at once with the cached bytes (not counted as a memory
// hit: a neighbour found so only ends the run there); onDisk says the
// disk tier has it. The tiers are asked after the call is started: a flight puts a
// block in the tiers before it forgets its call, so that no block is
// fetched twice.
func (r *Reader) take(m *Member, j int64) (c *lru.Call[*pool.Block], own, onDisk bool) {
	k := key(m, j)
	c, own = r.calls.Start(k)
	if !own {
		return c, false, false
	}
	if b, ok := r.memBlock(m, j); ok {
		r.setCall(c, k, b, pool.Reader)
		return c, true, false
	}
	return c, true, r.disk.Has(k, m.Size)
}

// isDone reports whether c has ended.
func isDone(c *lru.Call[*pool.Block]) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}

// fly runs the flight of ru on the Reader's context, with the run's
// deadline: one request for blocks q0..q1, sent together with the load of
// the member's outboard, each block verified and completed as soon as its
// last byte and the outboard are both in (landing); then the blocks that
// failed verification (fromNetwork), that the request did not deliver
// (failed, with its error) and that the run holds without requesting them
// (load). If the outboard cannot be loaded, every block of the run fails
// with that error, and the request, whose bytes could not be verified, is
// ended.
func (r *Reader) fly(ru *run) {
	defer r.wg.Done()
	ctx, cancel := context.WithDeadline(r.ctx, ru.deadline)
	defer cancel()
	m := &ru.m
	v := &verifier{r: r, m: m}
	// The request's blocks land in pool slots (pool.Flight): the first
	// waits for one, the rest are taken only if free, so that no flight
	// holds slots while it waits for more; a run the pool cannot fill at
	// once is cut to the slots it got, and its other blocks load alone.
	blks, gerr := r.flightBlocks(ctx, m, ru.q0, ru.q1)
	if gerr != nil {
		for j := range ru.calls {
			i := ru.first + int64(j)
			r.complete(ru, i, nil, 0, r.failed(ctx, m, i, gerr))
		}
		return
	}
	n := int64(len(blks))
	alone := ru.q0 + n // the requested blocks from which on each loads alone
	var (
		bufs = make([][]byte, n)
		bad  = make([]error, n)
		l    = &landing{r: r, ru: ru, v: v, blks: blks, bufs: bufs, bad: bad, next: ru.q0, last: alone - 1}
		ferr error
		oerr error
	)
	defer l.releaseRest()
	if n > 0 {
		off0, _ := blockRange(m, ru.q0)
		for q, b := range blks {
			bufs[q] = b.Bytes()
		}
		l.off0 = off0
		fctx := ctx // the request's: ended if the outboard cannot be loaded
		if l.ready = v.atHand(); !l.ready {
			var stop context.CancelFunc
			fctx, stop = context.WithCancel(ctx)
			defer stop()
			v.goLoad(ctx, func(err error) {
				if err != nil {
					stop() // nothing the request brings can be verified
					return
				}
				l.outboardIn()
			})
		}
		ferr = r.fetch(fctx, m, off0, bufs, l.arrived, cachedCopy)
		oerr = v.wait()
		if errors.Is(ferr, b3.ErrMismatch) && l.next < alone {
			// The copy of block l.next has the wrong length (the tier's
			// answer says so): a bad copy. The blocks after it were not
			// delivered; each loads alone.
			bad[l.next-ru.q0] = fmt.Errorf("%w: %w", errBadLength, ferr)
			alone = l.next + 1
		}
	} else {
		oerr = v.loadOutboard(ctx)
	}
	if oerr != nil {
		for j := range ru.calls {
			i := ru.first + int64(j)
			r.complete(ru, i, nil, 0, r.failed(ctx, m, i, oerr))
		}
		return
	}
	what := "first copy"
	if ru.q1 > ru.q0 {
		what = fmt.Sprintf("copy in a request for blocks %d-%d", ru.q0, ru.q1)
	}
	// The bad copies are kept for their checks; the slots of blocks not
	// delivered go back now, before a block loaded alone waits for one.
	badBlks := make(map[int64]*pool.Block)
	for q, err := range bad {
		if i := ru.q0 + int64(q); err != nil && i < alone {
			badBlks[i] = l.take(i)
		}
	}
	l.releaseRest()
	for j := range ru.calls {
		i := ru.first + int64(j)
		switch {
		case i < ru.q0 || i >= alone:
			b, src, err := r.load(ctx, v, i)
			r.complete(ru, i, b, src, err)
		case bad[i-ru.q0] != nil:
			b, err := r.fromNetwork(ctx, v, i, badBlks[i], bad[i-ru.q0], what)
			if err == nil {
				r.st.verified.Add(1)
			}
			r.complete(ru, i, b, fromNetwork, err)
		case i >= l.next: // not delivered
			r.complete(ru, i, nil, 0, r.failed(ctx, m, i, ferr))
		}
	}
}

// flightBlocks returns pool blocks for the requested blocks q0..q1 of m
// (none if q0 > q1): the first waits for a free slot until ctx ends, the
// others are taken while slots are free. Waiting past ctx is a timeout of
// the run's blocks (ErrReadTimeout).
func (r *Reader) flightBlocks(ctx context.Context, m *Member, q0, q1 int64) ([]*pool.Block, error) {
	if q0 > q1 {
		return nil, nil
	}
	_, n := blockRange(m, q0)
	b, err := r.pool.Get(ctx, int(n), pool.Flight)
	if err != nil {
		if r.ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", ErrClosed, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrReadTimeout, err)
	}
	blks := make([]*pool.Block, 1, q1-q0+1)
	blks[0] = b
	for q := q0 + 1; q <= q1; q++ {
		_, n := blockRange(m, q)
		b, ok := r.pool.TryGet(int(n), pool.Flight)
		if !ok {
			r.st.runsCut.Add(1)
			break
		}
		blks = append(blks, b)
	}
	return blks, nil
}

// load returns the verified bytes of block i of v's member alone, and
// where they came from: from the disk tier (verified; a copy that fails is
// removed, reported and fetched again), or else from the store.
func (r *Reader) load(ctx context.Context, v *verifier, i int64) (*pool.Block, source, error) {
	m := v.m
	k := key(m, i)
	off, n := blockRange(m, i)
	blk, err := r.pool.Get(ctx, int(n), pool.Flight)
	if err != nil {
		return nil, 0, r.failed(ctx, m, i, fmt.Errorf("%w: %w", ErrReadTimeout, err))
	}
	b := blk.Bytes()
	if r.disk.ReadInto(k, m.Size, b) {
		err := v.check(ctx, i, b)
		if err == nil {
			r.st.diskHits.Add(1)
			r.st.verified.Add(1)
			return blk, fromDisk, nil
		}
		if !errors.Is(err, b3.ErrMismatch) { // the outboard could not be reloaded
			blk.Release(pool.Flight)
			return nil, 0, r.failed(ctx, m, i, err)
		}
		r.disk.Remove(k)
		r.st.mismatches.Add(1)
		if err := r.report(Event{Kind: KindMismatch, Member: m, Off: off, Len: n, From: FromDisk, Err: err}, nil); err != nil {
			blk.Release(pool.Flight)
			return nil, 0, err
		}
	}
	r.st.fetches.Add(1)
	bad := r.fetch(ctx, m, off, [][]byte{b}, nil, cachedCopy)
	switch {
	case errors.Is(bad, b3.ErrMismatch): // a copy of the wrong length
		bad = fmt.Errorf("%w: %w", errBadLength, bad)
	case bad != nil:
		blk.Release(pool.Flight)
		return nil, 0, r.failed(ctx, m, i, bad)
	default:
		bad = v.verify(i, b)
	}
	blk, err = r.fromNetwork(ctx, v, i, blk, bad, "first copy")
	if err != nil {
		return nil, 0, err
	}
	r.st.verified.Add(1)
	return blk, fromNetwork, nil
}
