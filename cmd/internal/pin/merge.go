package pin

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/versions"
	"github.com/pinfs/pinfs/verify"
)

// Merge writes the manifest of the plan pl (digest d) from the partial
// tables of its shards, reading no member. Every shard 0..N-1 must have
// stored its partial table and no other key may sit beside them; each
// partial must name exactly its shard's keys, versions and sizes. Merge
// then lists the prefix again (ErrChanged as S3), writes the member table
// and the manifest with the plan's manifest fields, and records every
// entry in the digest cache. The digest is the one S3 gives for the same
// listing and options.
func (p *Pinner) Merge(ctx context.Context, pl *Plan, d verify.Digest) (verify.Digest, error) {
	kl, ok := p.Store.(store.KeyLister)
	if !ok {
		return "", fmt.Errorf("merge: store %s cannot list keys", p.Store)
	}
	opts, err := pl.Options(p.Options)
	if err != nil {
		return "", fmt.Errorf("plan %s: %w", d, err)
	}
	p.Options = opts
	keys, err := kl.List(ctx, shardPrefix(d))
	if err != nil {
		return "", fmt.Errorf("merge: listing shards of plan %s: %w", d, err)
	}
	if err := checkShardKeys(d, pl.Len(), keys); err != nil {
		return "", err
	}
	entries, metaBytes, err := p.loadPartials(ctx, pl, d)
	if err != nil {
		return "", err
	}
	bucket, prefix := pl.Source.Bucket, pl.Source.Prefix
	vs := pl.listing()
	if err := p.relist(ctx, bucket, prefix, vs); err != nil {
		return "", err
	}
	items, err := s3Items(bucket, prefix, vs)
	if err != nil {
		return "", err
	}
	all := make([]versions.Entry, 0, len(items))
	for _, it := range items {
		e := entries[it.m.S3.Key]
		p.fill(it, e.Digest)
		all = append(all, e)
	}
	md, err := p.write(ctx, pl.source(), items)
	if err != nil {
		return "", err
	}
	p.stats = Stats{Members: len(items), Reused: len(items), MetaBytes: metaBytes}
	idx, err := p.cacheIndex(bucket, prefix)
	if err == nil {
		err = idx.Record(ctx, all, all)
	}
	if err != nil {
		p.stats.CacheError = err.Error()
	}
	return md, nil
}

// checkShardKeys refuses the keys under a plan's shard prefix unless they
// are exactly shards 0..n-1.
func checkShardKeys(d verify.Digest, n int, keys []string) error {
	have := make([]bool, n)
	var extra []string
	for _, k := range keys {
		name := strings.TrimPrefix(k, shardPrefix(d))
		i, err := strconv.Atoi(name)
		if err != nil || i < 0 || i >= n || strconv.Itoa(i) != name {
			extra = append(extra, verify.Printable(name))
			continue
		}
		have[i] = true
	}
	var missing []string
	for i, ok := range have {
		if !ok {
			missing = append(missing, strconv.Itoa(i))
		}
	}
	var msgs []string
	if len(missing) > 0 {
		msgs = append(msgs, fmt.Sprintf("missing %s %s of %d: run pinfs pin --plan %s --shard %s",
			plural(len(missing), "shard", "shards"), nameChanges(missing), n, d, missing[0]))
	}
	if len(extra) > 0 {
		msgs = append(msgs, fmt.Sprintf("extra %s %s: plan %s has %d shards",
			plural(len(extra), "shard", "shards"), nameChanges(extra), d, n))
	}
	if len(msgs) > 0 {
		return fmt.Errorf("merge: %s", strings.Join(msgs, "; "))
	}
	return nil
}

// plural returns one or many by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// loadPartials fetches and checks every shard's partial table and returns
// the entries by key and the bytes read.
func (p *Pinner) loadPartials(ctx context.Context, pl *Plan, d verify.Digest) (map[string]versions.Entry, int64, error) {
	var (
		mu      sync.Mutex
		entries = make(map[string]versions.Entry)
		read    int64
		errs    []string
		wg      sync.WaitGroup
		next    = make(chan int)
	)
	for range min(cmp.Or(max(p.Jobs, 0), 8), pl.Len()) {
		wg.Go(func() {
			for i := range next {
				es, n, err := p.loadPartial(ctx, pl, d, i)
				mu.Lock()
				read += n
				if err != nil {
					errs = append(errs, err.Error())
				}
				for _, e := range es {
					entries[e.Key] = e
				}
				mu.Unlock()
			}
		})
	}
	for i := range pl.Len() {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return nil, read, fmt.Errorf("merge: %s", summarize(errs))
	}
	return entries, read, ctx.Err()
}

// loadPartial fetches shard i's partial table and checks that it covers
// exactly the plan's shard i.
func (p *Pinner) loadPartial(ctx context.Context, pl *Plan, d verify.Digest, i int) ([]versions.Entry, int64, error) {
	b, err := p.Store.Get(ctx, shardKey(d, i))
	if err != nil {
		return nil, 0, fmt.Errorf("shard %d: %w", i, err)
	}
	bucket, es, err := versions.Parse(b)
	if err != nil {
		return nil, int64(len(b)), fmt.Errorf("shard %d: partial table: %w; run pinfs pin --plan %s --shard %d again", i, err, d, i)
	}
	if bucket != pl.Source.Bucket {
		return nil, int64(len(b)), fmt.Errorf("shard %d: partial table of bucket %q, the plan's is %q", i, bucket, pl.Source.Bucket)
	}
	if diff := coverDiff(pl.Shards[i].Objects, es); diff != "" {
		return nil, int64(len(b)), fmt.Errorf("shard %d: partial table does not cover the plan's shard: %s; run pinfs pin --plan %s --shard %d again", i, diff, d, i)
	}
	return es, int64(len(b)), nil
}

// coverDiff names the first difference between a plan shard's objects and
// a partial table's entries (both sorted by key), or returns "".
func coverDiff(want []PlanObject, got []versions.Entry) string {
	for j := 0; j < len(want) || j < len(got); j++ {
		switch {
		case j >= len(got):
			return "lacks " + verify.Printable(want[j].Key)
		case j >= len(want) || got[j].Key < want[j].Key:
			return "names " + verify.Printable(got[j].Key) + ", which is not in the shard"
		case got[j].Key > want[j].Key:
			return "lacks " + verify.Printable(want[j].Key)
		case got[j].VersionID != want[j].VersionID:
			return fmt.Sprintf("%s at version %s, the plan's is %s", verify.Printable(want[j].Key),
				verify.Printable(got[j].VersionID), verify.Printable(want[j].VersionID))
		case got[j].Size != want[j].Size:
			return fmt.Sprintf("%s of %d bytes, the plan's has %d", verify.Printable(want[j].Key), got[j].Size, want[j].Size)
		}
	}
	return ""
}
