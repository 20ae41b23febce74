// Package pool holds block memory off the Go heap: fixed-size slots in
// one anonymous mapping, handed out as Blocks and recycled by reference
// count.
//
// A Block is one load of one slot. Whoever holds it (a fetch in flight,
// the memory tier, readahead, a load's waiters, a FUSE reply until the
// kernel has it, the disk tier's write-behind queue, an HTTP response of
// pinfs serve) holds a reference in its own name (Holder), taken with
// Retain or TryRetain and given back with Release. The last Release
// returns the slot to the pool, where the next Get reuses it: its pages
// are already mapped, so a reused slot costs no page fault, and the
// garbage collector never sees block bytes, whatever the number of
// readers. The pool's size bounds block memory by construction: when
// every slot is taken, Get waits for one (until its context ends) and
// nothing is allocated beside the pool.
//
// The rules are checked, not trusted. A Block's bytes, a Retain and a
// Release panic once the Block is released; a Release in the name of a
// holder that holds no reference panics (a double release, or one holder
// releasing another's reference). A Block handle is never reused, so a
// stale handle can only fail, never see the bytes of the slot's next
// load; TryRetain is how a holder that may race with the last Release (a
// cache lookup, a waiter of a load) asks for a reference. Built with the
// pooldebug tag, a released slot is filled with poison and Get checks the
// poison before it hands the slot out again: a write through a stale
// slice made after the Release fails the next Get of that slot.
//
// Blocks smaller than SmallMax are not worth a slot: Get returns them on
// the Go heap, with the same reference counting and checks, and their
// last Release leaves them to the collector.
package pool
