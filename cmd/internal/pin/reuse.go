package pin

import (
	"context"
	"fmt"
	"sync"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/versions"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// cacheIndex is the digest cache of one source (*versions.Index).
type cacheIndex interface {
	Load(ctx context.Context) (*versions.Table, error)
	Record(ctx context.Context, fresh, live []versions.Entry) error
}

// cacheRun is what an S3 pin (or shard) knows about the versions it
// hashes: the S3 members of its parents and the digest cache of its
// source, and the checkpoints of what it read into that cache.
type cacheRun struct {
	p       *Pinner
	bucket  string
	parents *versions.Table // S3 members of the parents in bucket
	cache   *versions.Table // the digest cache of the source; empty when unreadable
	ck      *checkpointer   // nil when the cache is not written

	mu    sync.Mutex
	stats Stats
}

// hashVersions hashes S3 items in parallel, reusing what the parents and
// the digest cache of bucket/prefix know (unless Rehash), checkpointing
// freshly read entries into that cache, and fills p.stats. It returns the
// open cache run for the caller to finish; when hashing fails it has
// recorded what was read already, so a rerun reuses it.
func (p *Pinner) hashVersions(ctx context.Context, src verify.Source, bucket, prefix string, items []*item) (*cacheRun, error) {
	c, err := p.openRun(ctx, bucket, prefix)
	if err == nil {
		c.stats.Members = len(items)
		err = p.forEach(ctx, src, items, c.do)
	}
	if c.ck != nil {
		c.ck.stop()
		if err != nil {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), failedFlushTimeout)
			c.ck.flush(fctx)
			cancel()
		}
	}
	c.mu.Lock()
	p.stats = c.stats
	c.mu.Unlock()
	return c, err
}

// openRun loads the S3 members of every parent in bucket and the digest
// cache of bucket/prefix. A parent manifest that cannot be read fails, as
// the manifest would; a cache that cannot be read is a warning.
func (p *Pinner) openRun(ctx context.Context, bucket, prefix string) (*cacheRun, error) {
	c := &cacheRun{p: p, bucket: bucket, parents: versions.NewTable(), cache: versions.NewTable()}
	for _, d := range p.Parents {
		if err := c.addParent(ctx, d); err != nil {
			return c, err
		}
	}
	idx, err := p.cacheIndex(bucket, prefix)
	if err != nil {
		c.cacheError(err)
		return c, nil
	}
	t, err := idx.Load(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return c, ctx.Err()
		}
		c.cacheError(fmt.Errorf("loading: %w", err))
		return c, nil
	}
	c.cache = t
	c.stats.MetaBytes += t.Bytes
	if t.Skipped > 0 {
		c.cacheError(fmt.Errorf("%d segments missing or damaged were skipped", t.Skipped))
	}
	c.ck = newCheckpointer(ctx, idx, c.cacheError)
	return c, nil
}

// cacheIndex opens the digest cache of bucket/prefix in the store.
func (p *Pinner) cacheIndex(bucket, prefix string) (cacheIndex, error) {
	if p.openCache != nil {
		return p.openCache(bucket, prefix)
	}
	st, ok := p.Store.(versions.Store)
	if !ok {
		return nil, fmt.Errorf("store %s cannot replace a key conditionally", p.Store)
	}
	return versions.Open(st, bucket, prefix), nil
}

// addParent adds the S3 members in c's bucket of the manifest d, fetched
// and checked as every command fetches a snapshot. A parent that cannot be
// read or checked fails the pin: its digest goes into the manifest.
func (c *cacheRun) addParent(ctx context.Context, d verify.Digest) error {
	checked, err := verify.Fetch(ctx, countingGetter{c.p.Store, &c.stats.MetaBytes}, d)
	var snap *verify.Snapshot
	if err == nil {
		snap, err = checked.Snapshot()
	}
	if err != nil {
		return fmt.Errorf("parent %s: %w", d, err)
	}
	t := snap.Table()
	for i := range t.Len() {
		mem := t.Member(i)
		sum, ok := t.Sum(i)
		if mem.S3 == nil || mem.S3.Bucket != c.bucket || !ok {
			continue
		}
		c.parents.Add(versions.Entry{Key: mem.S3.Key, VersionID: mem.S3.VersionID, Size: mem.Size, Digest: sum})
	}
	return nil
}

// countingGetter adds the bytes of every blob it gets to *n. It has no
// Open, so verify.Fetch reads a member table whole and counts it.
type countingGetter struct {
	g verify.Getter
	n *int64
}

func (cg countingGetter) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := cg.g.Get(ctx, key)
	*cg.n += int64(len(b))
	return b, err
}

// do pins one item: it reuses the digest a parent or the cache knows for
// its version and size, when the store's outboard (for members of more
// than one group) checks against it; otherwise it reads the item.
func (c *cacheRun) do(ctx context.Context, it *item) error {
	if e, ok := c.known(it); ok && !c.p.Rehash {
		reused, err := c.reuse(ctx, it, e)
		if reused || err != nil {
			return err
		}
	}
	if err := c.p.hash(ctx, it); err != nil {
		return err
	}
	c.read(ctx, it)
	return nil
}

// known returns the entry of it's version with its listed size, from the
// parents first, then the cache.
func (c *cacheRun) known(it *item) (versions.Entry, bool) {
	for _, t := range []*versions.Table{c.parents, c.cache} {
		if e, ok := t.Lookup(it.m.S3.Key, it.m.S3.VersionID); ok && e.Size == it.size {
			return e, true
		}
	}
	return versions.Entry{}, false
}

// reuse fills in it from e once the store's outboard of e checks; it
// reports false (read the member) when the outboard is missing or bad.
func (c *cacheRun) reuse(ctx context.Context, it *item, e versions.Entry) (bool, error) {
	if it.size > b3.GroupSize {
		ob, err := c.p.Store.Get(ctx, verify.OutboardKey(e.Digest.Hex()))
		c.count(func(s *Stats) { s.MetaBytes += int64(len(ob)) })
		if err != nil && ctx.Err() != nil {
			return false, ctx.Err()
		}
		if err != nil || b3.CheckOutboard(e.Digest, e.Size, ob) != nil {
			return false, nil
		}
	}
	c.p.fill(it, e.Digest)
	c.count(func(s *Stats) { s.Reused++ })
	c.note(ctx, e)
	return true, nil
}

// read counts a member that was read, audits what the parents and the
// cache said about its version, and notes it for the cache.
func (c *cacheRun) read(ctx context.Context, it *item) {
	got := entryOf(it)
	disagreed := 0
	for _, t := range []*versions.Table{c.parents, c.cache} {
		if e, ok := t.Lookup(got.Key, got.VersionID); ok && e != got {
			disagreed = 1
		}
	}
	c.count(func(s *Stats) {
		s.Read++
		s.ReadBytes += it.size
		s.Disagreed += disagreed
	})
	c.note(ctx, got)
}

// note checkpoints e into the cache unless the cache holds it already.
func (c *cacheRun) note(ctx context.Context, e versions.Entry) {
	if c.ck == nil {
		return
	}
	if have, ok := c.cache.Lookup(e.Key, e.VersionID); ok && have == e {
		return
	}
	c.ck.add(ctx, e)
}

// count updates the stats under the lock.
func (c *cacheRun) count(f func(*Stats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

// cacheError keeps the first failure of the digest cache.
func (c *cacheRun) cacheError(err error) {
	c.count(func(s *Stats) {
		if s.CacheError == "" {
			s.CacheError = err.Error()
		}
	})
}

// finish records the entries not yet checkpointed; with live != nil it
// may compact the cache. Errors go to p.stats.CacheError.
func (c *cacheRun) finish(ctx context.Context, live []versions.Entry) {
	if c == nil || c.ck == nil {
		return
	}
	if err := c.ck.final(ctx, live); err != nil && c.p.stats.CacheError == "" {
		c.p.stats.CacheError = err.Error()
	}
}

// entryOf returns the digest-cache entry of a hashed S3 item.
func entryOf(it *item) versions.Entry {
	d, _ := b3.Parse(it.m.Digest)
	return versions.Entry{Key: it.m.S3.Key, VersionID: it.m.S3.VersionID, Size: it.size, Digest: d}
}

// storeOutboard stores the outboard of size bytes with digest sum. Its key
// is content addressed, so Put refuses to overwrite other bytes there;
// when the store holds an outboard under it that does not check (cut short
// or corrupted), that one is replaced with a conditional swap.
func (p *Pinner) storeOutboard(ctx context.Context, sum b3.Sum, size int64, outboard []byte) error {
	key := verify.OutboardKey(sum.Hex())
	err := p.Store.Put(ctx, key, outboard)
	sw, ok := p.Store.(store.Swapper)
	if err == nil || ctx.Err() != nil || !ok {
		return err
	}
	return replace(ctx, sw, key, outboard, func(cur []byte) bool { return b3.CheckOutboard(sum, size, cur) == nil })
}
