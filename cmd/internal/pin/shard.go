package pin

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/versions"
	"github.com/pinfs/pinfs/verify"
)

// shardPrefix is the store prefix of the partial tables of plan d.
func shardPrefix(d verify.Digest) string { return "shards/sha256/" + d.Hex() + "/" }

// shardKey is the store key of shard i's partial table of plan d.
func shardKey(d verify.Digest, i int) string { return shardPrefix(d) + strconv.Itoa(i) }

// Shard hashes shard i of the plan pl (digest d) as S3 hashes a whole
// prefix, with the same reuse and checkpoints, and stores its partial
// table, the digest-cache segment of the shard's entries, at
// shards/sha256/<planhex>/<i>. The manifest fields (the split rule among
// them) are the plan's. A rerun is idempotent: a stored partial with the
// same bytes is kept, a different one replaced, and a crashed run's
// checkpoints spare it most reads.
func (p *Pinner) Shard(ctx context.Context, pl *Plan, d verify.Digest, i int) error {
	if i < 0 || i >= pl.Len() {
		return fmt.Errorf("shard %d: plan %s has shards 0 to %d", i, d, pl.Len()-1)
	}
	sw, ok := p.Store.(store.Swapper)
	if !ok {
		return fmt.Errorf("shard %d: store %s cannot replace keys conditionally", i, p.Store)
	}
	opts, err := pl.Options(p.Options)
	if err != nil {
		return fmt.Errorf("plan %s: %w", d, err)
	}
	p.Options = opts
	bucket, prefix := pl.Source.Bucket, pl.Source.Prefix
	items, err := s3Items(bucket, prefix, pl.Shards[i].versions())
	if err != nil {
		return err
	}
	run, err := p.hashVersions(ctx, pl.source(), bucket, prefix, items)
	if err != nil {
		return fmt.Errorf("shard %d: %w", i, err)
	}
	run.finish(ctx, nil)
	es := make([]versions.Entry, len(items))
	for j, it := range items {
		es[j] = entryOf(it)
	}
	partial, err := versions.Encode(bucket, es)
	if err != nil {
		return fmt.Errorf("shard %d: partial table: %w", i, err)
	}
	if err := replace(ctx, sw, shardKey(d, i), partial, func(cur []byte) bool { return bytes.Equal(cur, partial) }); err != nil {
		return fmt.Errorf("shard %d: storing partial table: %w", i, err)
	}
	return nil
}
