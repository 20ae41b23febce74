package pin

import (
	"context"

	"github.com/pinfs/pinfs/store/versions"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// cacheRun is the digest cache of one source while items are hashed
// (stub: the REUSE helper fills it in).
type cacheRun struct{}

// hashVersions hashes S3 items in parallel, reusing what the parents and
// the digest cache of bucket/prefix know (unless Rehash), checkpointing
// freshly read entries into that cache, and fills p.stats. It returns the
// open cache run for the caller to finish.
func (p *Pinner) hashVersions(ctx context.Context, src verify.Source, bucket, prefix string, items []*item) (*cacheRun, error) {
	p.stats = Stats{Members: len(items), Read: len(items)}
	for _, it := range items {
		p.stats.ReadBytes += it.size
	}
	return &cacheRun{}, p.hashAll(ctx, src, items)
}

// finish records the entries not yet checkpointed; with live != nil it
// may compact the cache. Errors go to p.stats.CacheError.
func (c *cacheRun) finish(ctx context.Context, live []versions.Entry) {}

// entryOf returns the digest-cache entry of a hashed S3 item.
func entryOf(it *item) versions.Entry {
	d, _ := b3.Parse(it.m.Digest)
	return versions.Entry{Key: it.m.S3.Key, VersionID: it.m.S3.VersionID, Size: it.size, Digest: d}
}
