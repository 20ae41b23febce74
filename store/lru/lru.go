// Package lru holds the two small concurrency tools every cache tier of
// the read path uses: Cache, a map bounded by the bytes of its values
// that drops the least recently used entry first, and Group, which runs
// at most one call per key at a time and lets other callers join it.
package lru

import "sync"

// Cache is a map bounded by the total size of its values: a Put that goes
// over the budget drops the least recently used entries, but never the
// one it put, so a single value larger than the budget is kept alone. It
// is safe for concurrent use; mu guards everything below it.
type Cache[K comparable, V any] struct {
	max  int64
	size func(V) int64
	drop func(V) // nil, or called with every value that leaves the cache

	mu    sync.Mutex
	bytes int64
	items map[K]*entry[K, V]
	ring  entry[K, V] // sentinel: ring.next is the most recently used entry
}

type entry[K comparable, V any] struct {
	key        K
	val        V
	n          int64
	prev, next *entry[K, V]
}

// New returns a Cache that holds at most max bytes of values, as size
// measures them. A max <= 0 keeps only the latest value.
func New[K comparable, V any](max int64, size func(V) int64) *Cache[K, V] {
	c := &Cache[K, V]{max: max, size: size, items: make(map[K]*entry[K, V])}
	c.ring.next, c.ring.prev = &c.ring, &c.ring
	return c
}

// NewWithDrop is New with drop called, under the cache's lock, with every
// value that leaves it: pushed out, replaced, removed or cleared. A cache
// of counted references releases them there.
func NewWithDrop[K comparable, V any](max int64, size func(V) int64, drop func(V)) *Cache[K, V] {
	c := New[K](max, size)
	c.drop = drop
	return c
}

func (c *Cache[K, V]) dropped(v V) {
	if c.drop != nil {
		c.drop(v)
	}
}

// Get returns k's value and marks it recently used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.unlink(e)
	c.pushFront(e)
	return e.val, true
}

// Has reports whether k is held, without marking it used.
func (c *Cache[K, V]) Has(k K) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.items[k]
	return ok
}

// Put stores v under k (replacing what was there) as the most recently
// used entry, then drops least recently used entries over the budget.
func (c *Cache[K, V]) Put(k K, v V) {
	n := c.size(v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.unlink(e)
		c.bytes -= e.n
		c.dropped(e.val)
		e.val, e.n = v, n
		c.pushFront(e)
	} else {
		e := &entry[K, V]{key: k, val: v, n: n}
		c.items[k] = e
		c.pushFront(e)
	}
	c.bytes += n
	for c.bytes > c.max && c.ring.prev != c.ring.next {
		e := c.ring.prev
		c.unlink(e)
		delete(c.items, e.key)
		c.bytes -= e.n
		c.dropped(e.val)
	}
}

// Remove drops k's entry, if any.
func (c *Cache[K, V]) Remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.unlink(e)
		delete(c.items, k)
		c.bytes -= e.n
		c.dropped(e.val)
	}
}

// DropOldest drops up to n of the least recently used entries.
func (c *Cache[K, V]) DropOldest(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ; n > 0 && c.ring.prev != &c.ring; n-- {
		e := c.ring.prev
		c.unlink(e)
		delete(c.items, e.key)
		c.bytes -= e.n
		c.dropped(e.val)
	}
}

// Clear drops every entry.
func (c *Cache[K, V]) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.items {
		c.dropped(e.val)
	}
	clear(c.items)
	c.ring.next, c.ring.prev = &c.ring, &c.ring
	c.bytes = 0
}

// Len returns the number of entries.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

// Bytes returns the total size of the values held.
func (c *Cache[K, V]) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// Max returns the budget in bytes.
func (c *Cache[K, V]) Max() int64 { return c.max }

func (c *Cache[K, V]) unlink(e *entry[K, V]) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *Cache[K, V]) pushFront(e *entry[K, V]) {
	e.prev, e.next = &c.ring, c.ring.next
	c.ring.next.prev = e
	c.ring.next = e
}
