package blocks

import (
	"sync"

	"github.com/pinfs/pinfs/store/pool"
)

// The blocks of a flight's request land in their buffers while the
// member's outboard may still be loading (it is loaded together with the
// request: one round trip to the first byte, not two). Reading the body
// never waits for the outboard; verification does. Each block whose bytes
// are all in is verified and completed once the outboard is in too, on
// whichever goroutine brings the later of the two: the request's progress
// callback (arrived) or the outboard load (outboardIn). No block is
// verified against a missing outboard, and none is served or cached
// before it verifies.

// landing is the requested blocks q0..last of a run: their pool blocks
// and buffers, how many of the request's bytes are in, and the next block
// to settle. The flight's reference to each block (pool.Flight) passes
// to its call when it settles, to fromNetwork when it fails verification
// (take), and is released by releaseRest for the blocks never delivered. The fields
// after mu are guarded by it; once the request and the outboard load have
// both ended, the flight reads them without it.
type landing struct {
	r    *Reader
	ru   *run
	v    *verifier
	off0 int64         // the member offset of the request's first byte
	blks []*pool.Block // one per block q0..last; nil once handed on
	bufs [][]byte      // their bytes
	bad  []error       // per block: the verification failure, settled after the request
	last int64         // the last block requested

	mu    sync.Mutex
	have  int64 // bytes of the request delivered
	next  int64 // the next block to settle
	ready bool  // v.outboard is in: blocks may be verified
}

// arrived records that have bytes of the request are in and, if the
// outboard is in, settles the blocks they complete. It is the request's
// progress callback.
func (l *landing) arrived(have int64) {
	l.mu.Lock()
	l.have = have
	if l.ready {
		l.settle()
	}
	l.mu.Unlock()
}

// outboardIn records that v.outboard has been loaded and settles the
// blocks whose bytes came before it.
func (l *landing) outboardIn() {
	l.mu.Lock()
	l.ready = true
	l.settle()
	l.mu.Unlock()
}

// settle verifies each block from next on whose bytes are all in, in
// order, and completes its call; one that fails verification is left in
// bad for the flight to settle after the request. l.mu is held and the
// outboard is in.
func (l *landing) settle() {
	ru := l.ru
	for ; l.next <= l.last; l.next++ {
		off, bn := blockRange(&ru.m, l.next)
		if off+bn-l.off0 > l.have {
			return
		}
		b := l.bufs[l.next-ru.q0]
		l.r.st.fetches.Add(1)
		if err := l.v.verify(l.next, b); err != nil {
			l.bad[l.next-ru.q0] = err
			continue
		}
		l.r.st.verified.Add(1)
		l.r.complete(ru, l.next, l.take(l.next), fromNetwork, nil)
	}
}

// take hands on the flight's reference to block i's pool block. Once the
// request has ended it needs no lock: nothing else touches blks.
func (l *landing) take(i int64) *pool.Block {
	q := i - l.ru.q0
	b := l.blks[q]
	l.blks[q] = nil
	return b
}

// releaseRest releases the blocks not handed on: never delivered, or cut
// off by a bad copy before them. The flight calls it once it is done.
func (l *landing) releaseRest() {
	for q, b := range l.blks {
		if b != nil {
			b.Release(pool.Flight)
			l.blks[q] = nil
		}
	}
}
