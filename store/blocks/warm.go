package blocks

import (
	"context"
	"fmt"
	"time"

	"github.com/pinfs/pinfs/store/lru"
	"github.com/pinfs/pinfs/store/pool"
)

// Warm loads every block of m that the disk tier does not hold, verified,
// into the caches (the disk tier when there is one), calling progress with
// the bytes of each block as it is done (held already or loaded), in
// order. It starts runs of up to Config.SpanBlocks blocks, several at once
// (up to Config.ReadaheadMax bytes in flight), as a sequential reader's
// readahead would, within the same budget (it waits for room, while
// readahead skips), and returns the first error (a mismatch wraps
// b3.ErrMismatch). When it returns nil the blocks are in the disk tier
// (Disk.Flush has been called), unless the disk tier is disabled or
// refused them. Blocks in the memory tier alone are written to disk
// without being fetched again.
func (r *Reader) Warm(ctx context.Context, m *Member, progress func(int64)) error {
	if err := check(m, 0); err != nil {
		return err
	}
	if !r.enter() {
		return fmt.Errorf("%w: warm of %s", ErrClosed, m.Path)
	}
	defer r.reads.Done()
	if progress == nil {
		progress = func(int64) {}
	}
	type loading struct {
		i     int64
		c     *lru.Call[*pool.Block]
		start time.Time
	}
	var queue []loading // in block order
	// What an error leaves unread gives its room in the budget back.
	defer func() {
		for _, l := range queue {
			r.budget.release(key(m, l.i))
		}
	}()
	settle := func() error {
		l := queue[0]
		queue = queue[1:]
		b, err := r.get(ctx, m, l.i, pending{c: l.c}, l.start)
		r.budget.release(key(m, l.i))
		if err != nil {
			return err
		}
		_ = r.disk.PutBlock(key(m, l.i), m.Size, b) // best effort, as for a read
		progress(int64(b.Len()))
		b.Release(pool.Reader)
		return nil
	}
	nb := numBlocks(m.Size)
	window := int(max(r.cfg.aheadBlocks(), 1))
	span := int64(min(r.cfg.SpanBlocks, window))
	for i := int64(0); i < nb; {
		k := key(m, i)
		_, n := blockRange(m, i)
		if r.disk.Has(k, m.Size) {
			progress(n)
			i++
			continue
		}
		if b, ok := r.memGet(m, i); ok {
			_ = r.disk.PutBlock(k, m.Size, b)
			b.Release(pool.Reader)
			progress(n)
			i++
			continue
		}
		for len(queue) > 0 && len(queue)+int(span) > window {
			if err := settle(); err != nil {
				return err
			}
		}
		start := time.Now()
		hi := min(i+span, nb) - 1
		cs, first, _ := r.startRun(m, i, i, hi, hi, runWarm, false, time.Time{})
		if cs == nil { // no room in the budget: wait for the oldest block, or for others to be read
			var err error
			if len(queue) > 0 {
				err = settle()
			} else {
				err = r.budget.wait(ctx)
			}
			if err != nil {
				return err
			}
			continue
		}
		for j, c := range cs {
			queue = append(queue, loading{first + int64(j), c, start})
		}
		i = first + int64(len(cs))
	}
	for len(queue) > 0 {
		if err := settle(); err != nil {
			return err
		}
	}
	if r.disk != nil {
		r.disk.Flush()
	}
	return nil
}
