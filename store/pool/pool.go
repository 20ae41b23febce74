package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// SlotSize is the size of a slot: one block of the read path (1 MiB).
const SlotSize = 1 << 20

// SmallMax is the size below which a Block lives on the Go heap rather
// than in a slot (a small member's only block).
const SmallMax = 64 << 10

// ErrClosed is returned by Get once the pool is closed.
var ErrClosed = errors.New("pool: closed")

// Pool is a fixed number of SlotSize slots in one anonymous mapping. It is
// safe for concurrent use.
type Pool struct {
	arena []byte
	slots int

	mu      sync.Mutex
	short   []func()      // OnShort's: asked to give slots back when a Get must wait
	lastAsk time.Time     // when they were asked last
	free    []int32       // a stack: the slot freed last is reused first
	used    []bool        // slots handed out at least once (pooldebug's poison check)
	wake    chan struct{} // closed (and replaced) when a slot is freed while waiters wait
	waiters int
	closed  bool

	inUse   [numHolders]atomic.Int64 // references held, by holder
	waits   atomic.Int64             // Gets that found no free slot
	waitNs  atomic.Int64             // time they waited
	timeout atomic.Int64             // Gets whose ctx ended first
	gets    atomic.Int64
	small   atomic.Int64 // Gets served on the heap (n < SmallMax)
}

// New returns a pool of bytes/SlotSize slots (at least one). Its pages are
// mapped as they are first used; Close unmaps them.
func New(bytes int64) (*Pool, error) {
	n := max(bytes/SlotSize, 1)
	if n > 1<<30/SlotSize*1024 { // 1 TiB: a size that can only be a mistake
		return nil, fmt.Errorf("pool: %d bytes: too large", bytes)
	}
	arena, err := unix.Mmap(-1, 0, int(n*SlotSize), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("pool: map %d slots: %w", n, err)
	}
	p := &Pool{arena: arena, slots: int(n), free: make([]int32, n), used: make([]bool, n), wake: make(chan struct{})}
	for i := range p.free {
		p.free[i] = int32(int(n) - 1 - i) // slot 0 on top
	}
	return p, nil
}

// Slots returns the number of slots.
func (p *Pool) Slots() int { return p.slots }

// Bytes returns the pool's size in bytes.
func (p *Pool) Bytes() int64 { return int64(p.slots) * SlotSize }

// Get returns a Block of n bytes (0 < n <= SlotSize) held by h: a free
// slot, waiting for one until ctx ends, or, for n < SmallMax, heap memory.
// Its bytes are not zeroed: the caller overwrites them all.
func (p *Pool) Get(ctx context.Context, n int, h Holder) (*Block, error) {
	return p.get(ctx, n, h, true)
}

// askEvery is how often Gets that wait ask the OnShort functions for
// slots, at most; askAgain how long one waits before it asks again.
const (
	askEvery = 10 * time.Millisecond
	askAgain = 100 * time.Millisecond
)

// OnShort registers f, which a Get that finds no free slot calls (at most
// every askEvery, before it waits) so that holders of slots they could
// do without (a cache's oldest blocks, blocks read ahead and left
// unread) give them back. f must not call Get.
func (p *Pool) OnShort(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.short = append(p.short, f)
}

// Short reports whether a Get is waiting for a slot now: a holder that
// may drop what it would hold (the disk tier's write-behind) does.
func (p *Pool) Short() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiters > 0
}

// TryGet is Get without waiting: ok is false when no slot is free (or n
// is out of range, or the pool is closed).
func (p *Pool) TryGet(n int, h Holder) (*Block, bool) {
	b, err := p.get(context.Background(), n, h, false)
	return b, err == nil
}

// errFull is TryGet's answer on a full pool.
var errFull = errors.New("pool: no free slot")

func (p *Pool) get(ctx context.Context, n int, h Holder, wait bool) (*Block, error) {
	if n <= 0 || n > SlotSize {
		return nil, fmt.Errorf("pool: get %d bytes: want 1 to %d", n, SlotSize)
	}
	p.gets.Add(1)
	if n < SmallMax {
		p.small.Add(1)
		return p.block(-1, make([]byte, n), h), nil
	}
	var start time.Time
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrClosed
		}
		if k := len(p.free); k > 0 {
			i := p.free[k-1]
			p.free = p.free[:k-1]
			reused := p.used[i]
			p.used[i] = true
			p.mu.Unlock()
			if !start.IsZero() {
				p.waitNs.Add(int64(time.Since(start)))
			}
			buf := p.slot(i)
			if reused {
				checkPoison(buf, int(i))
			}
			return p.block(i, buf[:n], h), nil
		}
		if !wait {
			p.mu.Unlock()
			return nil, errFull
		}
		if start.IsZero() {
			start = time.Now()
			p.waits.Add(1)
		}
		wake := p.wake
		p.waiters++
		var ask []func()
		if now := time.Now(); now.Sub(p.lastAsk) >= askEvery {
			p.lastAsk, ask = now, p.short
		}
		p.mu.Unlock()
		for _, f := range ask {
			f()
		}
		t := time.NewTimer(askAgain)
		select {
		case <-wake:
			t.Stop()
			p.mu.Lock()
			p.waiters--
			p.mu.Unlock()
		case <-t.C: // ask again: blocks left unread age into ones to give back
			p.mu.Lock()
			p.waiters--
			p.mu.Unlock()
		case <-ctx.Done():
			t.Stop()
			p.mu.Lock()
			p.waiters--
			p.mu.Unlock()
			p.waitNs.Add(int64(time.Since(start)))
			p.timeout.Add(1)
			return nil, fmt.Errorf("pool: waiting for a free slot of %d: %w", p.slots, context.Cause(ctx))
		}
	}
}

func (p *Pool) slot(i int32) []byte {
	off := int(i) * SlotSize
	return p.arena[off : off+SlotSize : off+SlotSize]
}

func (p *Pool) block(i int32, buf []byte, h Holder) *Block {
	b := &Block{p: p, slot: i, buf: buf}
	b.refs.Store(1)
	b.held[h].Store(1)
	p.inUse[h].Add(1)
	return b
}

// put returns slot i to the pool.
func (p *Pool) put(i int32) {
	poison(p.slot(i))
	p.mu.Lock()
	p.free = append(p.free, i)
	if p.waiters > 0 {
		close(p.wake)
		p.wake = make(chan struct{})
	}
	p.mu.Unlock()
}

// Close unmaps the pool if every slot is free, and refuses further Gets.
// With slots still held it leaves the mapping in place (their holders may
// still read them) and returns an error.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	close(p.wake)
	p.wake = make(chan struct{})
	if held := p.slots - len(p.free); held > 0 {
		return fmt.Errorf("pool: close: %d slots still held; left mapped", held)
	}
	return unix.Munmap(p.arena)
}

// Stats is a snapshot of the pool.
type Stats struct {
	Slots, Free int
	SlotSize    int
	// InUse counts the references held, by holder: a slot shared by the
	// memory tier and a reply counts once under each.
	InUse map[string]int64
	// Gets counts every Get, Small those served on the heap; Waits the
	// Gets that found no free slot, WaitTime their total wait, and
	// Timeouts those whose context ended first.
	Gets, Small, Waits, Timeouts int64
	WaitTime                     time.Duration
}

// Stats returns the pool's counters now.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	free := len(p.free)
	p.mu.Unlock()
	s := Stats{Slots: p.slots, Free: free, SlotSize: SlotSize, InUse: make(map[string]int64, numHolders),
		Gets: p.gets.Load(), Small: p.small.Load(), Waits: p.waits.Load(), Timeouts: p.timeout.Load(),
		WaitTime: time.Duration(p.waitNs.Load())}
	for h := range Holder(numHolders) {
		s.InUse[h.String()] = p.inUse[h].Load()
	}
	return s
}
