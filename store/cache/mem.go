package cache

import (
	"fmt"
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/pinfs/pinfs/store/lru"
	"github.com/pinfs/pinfs/store/pool"
)

// Mem is the memory tier: verified blocks in a ristretto cache whose cost
// is the sum of the blocks' lengths, behind an optional front (WithFront):
// a small LRU of the latest blocks put, which admits every block at once.
// It is safe for concurrent use.
//
// ristretto admits items through a buffer and an admission policy: a block
// may become visible in it a moment after Put returns, or not at all. The
// front hides that: a block just put is found by Get at once and stays
// until the front's budget pushes it out, so that a block read ahead is
// still there when its reader arrives. Wait blocks until ristretto has
// applied every earlier Put.
//
// Blocks are pool Blocks (store/pool): the front and ristretto each hold
// a reference in the name of pool.Memory while they keep a block, and
// release it when the block leaves (pushed out, rejected, replaced,
// cleared). Get hands the caller a reference of its own. The bytes are
// shared by every holder and must never be modified.
type Mem struct {
	c      *ristretto.Cache[string, memEntry] // nil: front only
	front  *lru.Cache[Key, *pool.Block]       // nil: no front
	closed atomic.Bool
	hits   atomic.Int64
	misses atomic.Int64
}

// memEntry keeps the full key next to the data, so that a hash collision in
// ristretto (it keeps two 64-bit hashes, not the key) can never serve the
// wrong block.
type memEntry struct {
	key Key
	blk *pool.Block
}

// blockCost is what a block costs a tier's budget: a whole slot if it
// holds one (that is the memory it keeps from others), else its length.
func blockCost(b *pool.Block) int64 {
	if b.Slotted() {
		return pool.SlotSize
	}
	return int64(b.Len())
}

func releaseMem(b *pool.Block) { b.Release(pool.Memory) }

// MemStats counts the memory tier's activity.
type MemStats struct {
	Hits, Misses int64
	Bytes        int64 // bytes held now by ristretto
	FrontBytes   int64 // bytes held now by the front (blocks also in ristretto count in both)
	Evictions    int64 // blocks evicted to stay within the budget
	Rejected     int64 // Puts the admission policy or a full buffer turned away
}

// MemOption configures NewMem.
type MemOption func(*Mem)

// WithFront puts an always-admitting LRU of at most bytes in front of the
// ristretto cache; its budget comes on top of NewMem's maxBytes. bytes <= 0
// means no front.
func WithFront(bytes int64) MemOption {
	return func(m *Mem) {
		if bytes > 0 {
			m.front = lru.NewWithDrop[Key](bytes, blockCost, releaseMem)
		}
	}
}

// NewMem returns a memory tier that holds at most maxBytes of blocks in
// ristretto, plus the front, if any. maxBytes <= 0 leaves the front alone
// (an error without one).
func NewMem(maxBytes int64, opts ...MemOption) (*Mem, error) {
	m := &Mem{}
	for _, o := range opts {
		o(m)
	}
	if maxBytes <= 0 {
		if m.front == nil {
			return nil, fmt.Errorf("cache: memory tier budget %d: must be positive", maxBytes)
		}
		return m, nil
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
		// ristretto may hand an eviction the zero value (an entry gone
		// meanwhile); every value it stored exits once.
		OnExit: func(e memEntry) {
			if e.blk != nil {
				releaseMem(e.blk)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("cache: memory tier: %w", err)
	}
	m.c = c
	return m, nil
}

// Get returns the block stored under k with a reference held by h, which
// the caller releases.
func (m *Mem) Get(k Key, h pool.Holder) (*pool.Block, bool) {
	if b, ok := m.get(k, h); ok {
		m.hits.Add(1)
		return b, true
	}
	m.misses.Add(1)
	return nil, false
}

// Has reports whether the tier holds k's block, without counting a hit or
// a miss or refreshing the block in the front.
func (m *Mem) Has(k Key) bool {
	if m.closed.Load() {
		return false
	}
	if m.front != nil && m.front.Has(k) {
		return true
	}
	if m.c == nil {
		return false
	}
	e, ok := m.c.Get(k.bytes())
	return ok && e.key == k
}

// get returns k's block retained for h. A block found while it leaves the
// tier (its last reference released meanwhile) is a miss.
func (m *Mem) get(k Key, h pool.Holder) (*pool.Block, bool) {
	if m.closed.Load() {
		return nil, false
	}
	if m.front != nil {
		if b, ok := m.front.Get(k); ok && b.TryRetain(h) {
			return b, true
		}
	}
	if m.c == nil {
		return nil, false
	}
	e, ok := m.c.Get(k.bytes())
	if !ok || e.key != k || !e.blk.TryRetain(h) {
		return nil, false
	}
	return e.blk, true
}

// Put offers the verified block b under k: the front (if any) takes it at
// once, ristretto when its policy admits it. Each takes a reference of its
// own (pool.Memory); the caller keeps its own. Put must be called while
// the caller holds a reference.
func (m *Mem) Put(k Key, b *pool.Block) {
	if m.closed.Load() {
		return
	}
	if m.front != nil {
		m.front.Put(k, b.Retain(pool.Memory))
	}
	if m.c != nil {
		b.Retain(pool.Memory)
		if !m.c.Set(k.bytes(), memEntry{key: k, blk: b}, blockCost(b)) {
			b.Release(pool.Memory) // dropped: ristretto's buffer was full
		}
	}
}

// Wait blocks until every Put that returned before it has been applied.
func (m *Mem) Wait() {
	if m.c != nil && !m.closed.Load() {
		m.c.Wait()
	}
}

// TrimFront drops the older half of the front's blocks: their slots go
// back to the pool unless ristretto (or another holder) keeps them. The
// Reader calls it when a load waits for a slot.
func (m *Mem) TrimFront() {
	if m.front != nil {
		m.front.DropOldest((m.front.Len() + 1) / 2)
	}
}

// FrontLimit returns the front's budget in bytes (0: no front).
func (m *Mem) FrontLimit() int64 {
	if m.front == nil {
		return 0
	}
	return m.front.Max()
}

// Close stops the cache's goroutines and drops its blocks. Get and Put after
// Close are misses and no-ops.
func (m *Mem) Close() {
	if m.closed.Swap(true) {
		return
	}
	if m.front != nil {
		m.front.Clear()
	}
	if m.c != nil {
		m.c.Close()
	}
}

// Stats returns the tier's counters.
func (m *Mem) Stats() MemStats {
	s := MemStats{Hits: m.hits.Load(), Misses: m.misses.Load()}
	if m.front != nil {
		s.FrontBytes = m.front.Bytes()
	}
	if m.c != nil {
		mt := m.c.Metrics
		s.Bytes = int64(mt.CostAdded()) - int64(mt.CostEvicted())
		s.Evictions = int64(mt.KeysEvicted())
		s.Rejected = int64(mt.SetsRejected() + mt.SetsDropped())
	}
	return s
}
