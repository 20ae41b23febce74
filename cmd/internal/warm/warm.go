// Package warm implements pinfs warm: it fetches and verifies the selected
// members of a snapshot into the disk cache a mount on the same cache dir
// reads, so that a node can be warmed before training (docs/warm.md).
//
// Select picks members by path and split, Open opens the cache dir the
// way pinfs mount does, and Run loads the members that are not on disk,
// several at once, through blocks.Reader.Warm: only verified bytes enter
// the cache. Blocks already on disk are neither fetched nor re-read
// (every disk hit is verified when the mount serves it).
package warm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/progress"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// ErrBudget is wrapped by the error of a selection that cannot fit the
// disk cache's budget (or a disabled disk cache); nothing was fetched.
var ErrBudget = errors.New("does not fit the disk cache")

// DefaultJobs is how many members Run warms at once by default.
const DefaultJobs = 16

// Options tune Run.
type Options struct {
	Jobs     int       // members warmed at once; <= 0 means DefaultJobs
	Progress io.Writer // where the progress bar is drawn; nil for none
}

// Summary is the outcome of a warm. Bytes counts each distinct content
// once (members with the same digest share their blocks); CachedBytes
// were on disk before, FetchedBytes were loaded and verified now.
type Summary struct {
	Members      int     `json:"members"`
	Bytes        int64   `json:"bytes"`
	CachedBytes  int64   `json:"cached_bytes"`
	FetchedBytes int64   `json:"fetched_bytes"`
	Seconds      float64 `json:"seconds"`
}

// GBps is the warm's rate over all its bytes, in 10⁹ bytes per second.
func (s *Summary) GBps() float64 { return float64(s.Bytes) / max(s.Seconds, 1e-9) / 1e9 }

// item is one distinct content of the selection, and how many of the
// selected members have it.
type item struct {
	m       blocks.Member
	members int
	cached  int64 // bytes of its blocks on disk before the warm
	full    bool  // every block on disk
}

// Run warms the members sel of c's snapshot (indexes from Select) into
// c's disk tier and returns once every block of them is there. It fails
// before fetching anything when their bytes exceed the disk budget
// (ErrBudget), and at the first member that cannot be loaded and
// verified, with an error naming it; the other loads are then stopped.
// Run is called once per Cache: it closes c.Reader once its loads are
// done (Close waits for the disk writes they queued) before it checks
// that the blocks are there.
func Run(ctx context.Context, c *Cache, sel []int, o Options) (*Summary, error) {
	start := time.Now()
	items, err := plan(c.Snapshot.Digest(), c.Snapshot.Table(), sel)
	if err != nil {
		return nil, err
	}
	s := &Summary{Members: len(sel)}
	for _, it := range items {
		s.Bytes += it.m.Size
	}
	if limit := c.Disk.Limit(); s.Bytes > limit {
		if limit == 0 {
			return nil, fmt.Errorf("the selection (%d members) %w: the disk cache is disabled (--cache-disk 0)", s.Members, ErrBudget)
		}
		return nil, fmt.Errorf("the selection (%d members, %d bytes) %w budget of %d bytes (--cache-disk)", s.Members, s.Bytes, ErrBudget, limit)
	}
	for _, it := range items {
		it.cached, it.full = onDisk(c.Disk, &it.m)
		s.CachedBytes += it.cached
	}
	if err := load(ctx, c.Reader, items, s, o); err != nil {
		return nil, err
	}
	// Closing the reader waits for its flights and the disk writes they
	// queued, so that cached sees what a mount will find.
	if err := c.Reader.Close(); err != nil {
		return nil, err
	}
	if err := cached(c.Disk, items); err != nil {
		return nil, err
	}
	s.FetchedBytes = s.Bytes - s.CachedBytes
	s.Seconds = time.Since(start).Seconds()
	return s, nil
}

// plan groups the members sel of t, the table of snapshot snap, by
// content, largest first, so that the longest loads start first.
func plan(snap verify.Digest, t *verify.Table, sel []int) ([]*item, error) {
	byDigest := make(map[b3.Sum]*item)
	var items []*item
	for _, i := range sel {
		m := t.Member(i)
		d, err := b3.Parse(m.Digest)
		if err != nil {
			return nil, fmt.Errorf("member %q: %w", m.Path, err)
		}
		if it := byDigest[d]; it != nil {
			it.members++
			continue
		}
		bm, err := blocks.MemberOf(snap, i, &m)
		if err != nil {
			return nil, fmt.Errorf("member %q: %w", m.Path, err)
		}
		it := &item{m: bm, members: 1}
		byDigest[d] = it
		items = append(items, it)
	}
	slices.SortStableFunc(items, func(a, b *item) int { return cmp.Compare(b.m.Size, a.m.Size) })
	return items, nil
}

// onDisk returns the bytes of m's blocks that d holds, and whether it
// holds them all.
func onDisk(d *cache.Disk, m *blocks.Member) (int64, bool) {
	var n int64
	full := true
	for i := int64(0); i*blocks.BlockSize < m.Size; i++ {
		if d.Has(cache.Key{Digest: m.Digest, Index: i}, m.Size) {
			n += min(blocks.BlockSize, m.Size-i*blocks.BlockSize)
		} else {
			full = false
		}
	}
	return n, full
}

// load warms the items that are not wholly on disk, o.Jobs at a time,
// and draws the progress bar.
func load(ctx context.Context, r *blocks.Reader, items []*item, s *Summary, o Options) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var members atomic.Int64
	var bytes atomic.Int64
	var todo []*item
	for _, it := range items {
		if it.full {
			members.Add(int64(it.members))
			bytes.Add(it.m.Size)
		} else {
			todo = append(todo, it)
		}
	}
	bar := progress.New(cmp.Or(o.Progress, io.Discard), "warm", s.Members, s.Bytes, o.Progress == nil)
	update := func() { bar.Update(int(members.Load()), bytes.Load()) }
	update()

	var (
		once  sync.Once
		first error
		wg    sync.WaitGroup
		next  atomic.Int64
	)
	for range min(cmp.Or(max(o.Jobs, 0), DefaultJobs), len(todo)) {
		wg.Go(func() {
			for k := next.Add(1) - 1; k < int64(len(todo)) && ctx.Err() == nil; k = next.Add(1) - 1 {
				it := todo[k]
				err := r.Warm(ctx, &it.m, func(n int64) { bytes.Add(n); update() })
				if err != nil {
					once.Do(func() { first = memberError(&it.m, err); cancel() })
					return
				}
				members.Add(int64(it.members))
				update()
			}
		})
	}
	wg.Wait()
	bar.Done()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// memberError names m and what kind of failure err is.
func memberError(m *blocks.Member, err error) error {
	kind := "fetch failed"
	switch {
	case errors.Is(err, b3.ErrMismatch):
		kind = "content does not match its pinned digest"
	case errors.Is(err, store.ErrNotFound):
		kind = "pinned version missing"
	case errors.Is(err, context.Canceled):
		kind = "canceled"
	}
	return fmt.Errorf("member %q: %s: %w", m.Path, kind, err)
}

// cached checks that every block of items is in d now: a budget shared
// with other snapshots, or a disk that refused writes, can leave some out.
func cached(d *cache.Disk, items []*item) error {
	var missing int64
	var first string
	for _, it := range items {
		have, full := onDisk(d, &it.m)
		if !full {
			missing += it.m.Size - have
			if first == "" {
				first = it.m.Path
			}
		}
	}
	if missing > 0 {
		return fmt.Errorf("%d bytes of the selection are not in the disk cache after warming (first: member %q): "+
			"blocks were evicted or could not be written; raise --cache-disk or see the disk's free space", missing, first)
	}
	return nil
}
