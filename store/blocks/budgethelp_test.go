package blocks

import (
	"context"
	"errors"
	"testing"

	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/store/lru"
	"github.com/pinfs/pinfs/store/pool"
)

// holdLoaded holds k in b, loaded by a call that ended with data (in a
// block of p), as a flight that read it ahead would leave it.
func holdLoaded(t *testing.T, b *budget, p *pool.Pool, k cache.Key, n int64, data string, loose bool) {
	t.Helper()
	blk, err := p.Get(context.Background(), len(data), pool.Flight)
	if err != nil {
		t.Fatal(err)
	}
	copy(blk.Bytes(), data)
	c := lru.Finished(blk, nil)
	b.hold(k, n, c, loose)
	b.landed(k, c, blk)
	blk.Release(pool.Flight)
}

// holdFailed holds k in b, loaded by a call that failed.
func holdFailed(b *budget, k cache.Key, n int64) {
	b.hold(k, n, lru.Finished[*pool.Block](nil, errors.New("failed")), false)
}

// loadedString returns k's block held by b, as a string, releasing the
// reference loaded took.
func loadedString(b *budget, k cache.Key) (string, bool) {
	blk, ok := b.loaded(k)
	if !ok {
		return "", false
	}
	defer blk.Release(pool.Reader)
	return string(blk.Bytes()), true
}
