package pool

import (
	"fmt"
	"sync/atomic"
)

// Holder names who holds a reference to a Block: the pool counts the
// references by holder, and a Release must name the holder that took it.
type Holder uint8

// The holders of the read path.
const (
	Flight    Holder = iota // a fetch in flight: the buffer its bytes land in
	Call                    // a load's result, until it is forgotten
	Memory                  // the memory tier
	Readahead               // the readahead budget: read ahead, not read yet
	Reader                  // a read: a FUSE reply until the kernel has it, a copy, a Warm
	DiskQueue               // the disk tier's write-behind queue
	Serve                   // an HTTP response of pinfs serve
	numHolders
)

var holderNames = [numHolders]string{"flight", "call", "memory", "readahead", "reader", "disk_queue", "serve"}

// String returns the holder's name as the metrics and pinfs status show it.
func (h Holder) String() string {
	if h < numHolders {
		return holderNames[h]
	}
	return fmt.Sprintf("holder(%d)", h)
}

// Holders returns every holder, in order.
func Holders() []Holder {
	hs := make([]Holder, numHolders)
	for i := range hs {
		hs[i] = Holder(i)
	}
	return hs
}

// Block is one load of a slot (or, below SmallMax, of heap memory): its
// bytes stay the same until the last reference is released. A Block is
// never reused; its slot is.
type Block struct {
	p    *Pool
	slot int32 // -1: heap
	buf  []byte
	refs atomic.Int32
	held [numHolders]atomic.Int32
}

// Bytes returns the block's bytes. They are valid while the caller holds
// a reference; Bytes panics on a released Block.
func (b *Block) Bytes() []byte {
	if b.refs.Load() <= 0 {
		panic(fmt.Sprintf("pool: bytes of released block (slot %d)", b.slot))
	}
	return b.buf
}

// Pool returns the pool b was taken from.
func (b *Block) Pool() *Pool { return b.p }

// Len returns the number of bytes of the block.
func (b *Block) Len() int { return len(b.buf) }

// Slotted reports whether the block occupies a slot (not the heap).
func (b *Block) Slotted() bool { return b.slot >= 0 }

// Retain takes a reference for h and returns b. The caller must already
// hold one (in any name): Retain panics on a released Block.
func (b *Block) Retain(h Holder) *Block {
	if !b.TryRetain(h) {
		panic(fmt.Sprintf("pool: retain of released block (slot %d) by %s", b.slot, h))
	}
	return b
}

// TryRetain takes a reference for h unless the block has been released
// already, and reports whether it did. A holder that may race with the
// last Release (a cache lookup, a load's waiter) uses it.
func (b *Block) TryRetain(h Holder) bool {
	for {
		n := b.refs.Load()
		if n <= 0 {
			return false
		}
		if b.refs.CompareAndSwap(n, n+1) {
			b.take(h)
			return true
		}
	}
}

func (b *Block) take(h Holder) {
	b.held[h].Add(1)
	b.p.inUse[h].Add(1)
}

// Release gives back h's reference; the last one returns the slot to the
// pool. It panics if h holds no reference to b.
func (b *Block) Release(h Holder) {
	if b.held[h].Add(-1) < 0 {
		b.held[h].Add(1)
		panic(fmt.Sprintf("pool: release of block (slot %d) by %s, which holds no reference", b.slot, h))
	}
	b.p.inUse[h].Add(-1)
	switch n := b.refs.Add(-1); {
	case n == 0 && b.slot >= 0:
		b.p.put(b.slot)
	case n < 0:
		panic(fmt.Sprintf("pool: block (slot %d) released more often than retained", b.slot))
	}
}

// Move hands a reference from one holder to another without a release:
// the fetch that filled a block gives it to its load's call, say.
func (b *Block) Move(from, to Holder) {
	if b.held[from].Add(-1) < 0 {
		b.held[from].Add(1)
		panic(fmt.Sprintf("pool: move of block (slot %d) from %s, which holds no reference", b.slot, from))
	}
	b.p.inUse[from].Add(-1)
	b.take(to)
}
