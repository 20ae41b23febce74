package blocks

import (
	"container/list"
	"sync"

	"github.com/pinfs/pinfs/store/cache"
)

// recent holds the most recently loaded blocks, least recently used out,
// within a byte budget. It sits in front of the memory tier because
// ristretto's admission policy may turn a new block away: a block that
// readahead fetched must still be there when the reader arrives, or it is
// fetched twice. Its budget is part of the mount's fixed overhead. It is
// safe for concurrent use.
type recent struct {
	mu    sync.Mutex
	max   int64
	bytes int64
	lru   *list.List // of *recentEntry, most recent first
	index map[cache.Key]*list.Element
}

type recentEntry struct {
	key  cache.Key
	data []byte
}

func newRecent(max int64) *recent {
	return &recent{max: max, lru: list.New(), index: make(map[cache.Key]*list.Element)}
}

// get returns k's block and marks it recently used.
func (c *recent) get(k cache.Key) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.index[k]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(e)
	return e.Value.(*recentEntry).data, true
}

// put keeps b as k's block, dropping the least recently used blocks over
// the budget.
func (c *recent) put(k cache.Key, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.index[k]; ok {
		c.lru.MoveToFront(e)
		return
	}
	c.index[k] = c.lru.PushFront(&recentEntry{key: k, data: b})
	c.bytes += int64(len(b))
	for c.bytes > c.max && c.lru.Len() > 1 {
		e := c.lru.Back()
		re := c.lru.Remove(e).(*recentEntry)
		delete(c.index, re.key)
		c.bytes -= int64(len(re.data))
	}
}
