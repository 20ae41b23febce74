package check

import (
	"cmp"
	"context"
	"fmt"
	"sync"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

// Progress is told, after each member checked, how many members are done
// and the sum of their pinned sizes. Members calls it from the caller's
// goroutine, one call at a time.
type Progress func(done int, bytes int64)

// Members checks the objects of the members of t at indices idx, o.Jobs at
// a time: that each pinned version exists with its size, and with o.Deep
// that its bytes hash to the member's digest and its stored Bao outboard
// matches (the second level of `pinfs verify`, and `pinfs run replay`).
// It returns at most one problem per member, in the order of idx; a
// member whose source cannot be named as a store object is a bad_member.
// Without o.Deep, the members o.Hash names are re-read and hashed too.
// progress may be nil. An index out of range is an error, and so is the
// end of ctx (no partial result).
func Members(ctx context.Context, st store.Store, t *verify.Table, idx []int, o Options, progress Progress) ([]verify.Problem, error) {
	for _, i := range idx {
		if i < 0 || i >= t.Len() {
			return nil, fmt.Errorf("check: member index %d out of range (the table has %d members)", i, t.Len())
		}
	}
	type result struct {
		at int // position in idx
		p  *verify.Problem
	}
	next := make(chan int)
	results := make(chan result)
	var wg sync.WaitGroup
	for range cmp.Or(max(o.Jobs, 0), 16) {
		wg.Go(func() {
			for at := range next {
				i := idx[at]
				m := t.Member(i)
				results <- result{at, checkOne(ctx, st, &m, o.Deep || o.Hash != nil && o.Hash(i))}
			}
		})
	}
	go func() {
		defer close(next)
		for at := range idx {
			select {
			case next <- at:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(results)
	}()
	found := make([]*verify.Problem, len(idx))
	var done int
	var bytes int64
	for r := range results {
		found[r.at] = r.p
		done++
		bytes += t.Size(idx[r.at])
		if progress != nil {
			progress(done, bytes)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var ps []verify.Problem
	for _, p := range found {
		if p != nil {
			ps = append(ps, *p)
		}
	}
	return ps, nil
}
