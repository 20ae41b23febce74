package cache

import (
	"fmt"
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"
)

// Mem is the memory tier: verified blocks in a ristretto cache whose cost
// is the sum of the blocks' lengths. It is safe for concurrent use.
//
// Put is asynchronous, as ristretto admits items through a buffer and an
// admission policy: a block may become visible to Get a moment after Put
// returns, or not at all. Wait blocks until every earlier Put has been
// applied. The slices handed to Put and returned by Get are shared by every
// caller and must never be modified.
type Mem struct {
	c      *ristretto.Cache[string, memEntry]
	hits   atomic.Int64
	misses atomic.Int64
}

// memEntry keeps the full key next to the data, so that a hash collision in
// ristretto (it keeps two 64-bit hashes, not the key) can never serve the
// wrong block.
type memEntry struct {
	key  Key
	data []byte
}

// MemStats counts the memory tier's activity.
type MemStats struct {
	Hits, Misses int64
	Bytes        int64 // bytes held now
	Evictions    int64 // blocks evicted to stay within the budget
	Rejected     int64 // Puts the admission policy or a full buffer turned away
}

// NewMem returns a memory tier that holds at most maxBytes of blocks.
func NewMem(maxBytes int64) (*Mem, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("cache: memory tier budget %d: must be positive", maxBytes)
	}
	// ristretto wants about ten counters per item it may hold; assume
	// items are 64 KiB on average (small members make small blocks).
	counters := min(max(maxBytes/(64<<10)*10, 1000), 10_000_000)
	c, err := ristretto.NewCache(&ristretto.Config[string, memEntry]{
		NumCounters:        counters,
		MaxCost:            maxBytes,
		BufferItems:        64,
		Metrics:            true,
		IgnoreInternalCost: true,
	})
	if err != nil {
		return nil, fmt.Errorf("cache: memory tier: %w", err)
	}
	return &Mem{c: c}, nil
}

// Get returns the block stored under k.
func (m *Mem) Get(k Key) ([]byte, bool) {
	e, ok := m.c.Get(k.bytes())
	if !ok || e.key != k {
		m.misses.Add(1)
		return nil, false
	}
	m.hits.Add(1)
	return e.data, true
}

// Put offers the verified block b under k. The cache keeps b itself, not a
// copy.
func (m *Mem) Put(k Key, b []byte) {
	m.c.Set(k.bytes(), memEntry{key: k, data: b}, int64(len(b)))
}

// Wait blocks until every Put that returned before it has been applied.
func (m *Mem) Wait() { m.c.Wait() }

// Close stops the cache's goroutines and drops its blocks. Get and Put after
// Close are misses and no-ops.
func (m *Mem) Close() { m.c.Close() }

// Stats returns the tier's counters.
func (m *Mem) Stats() MemStats {
	mt := m.c.Metrics
	return MemStats{
		Hits:      m.hits.Load(),
		Misses:    m.misses.Load(),
		Bytes:     int64(mt.CostAdded()) - int64(mt.CostEvicted()),
		Evictions: int64(mt.KeysEvicted()),
		Rejected:  int64(mt.SetsRejected() + mt.SetsDropped()),
	}
}
