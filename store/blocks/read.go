package blocks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/store/lru"
	"github.com/pinfs/pinfs/store/pool"
	"github.com/pinfs/pinfs/verify/b3"
)

// ReadAt reads len(p) bytes of m starting at off into p, and returns the
// number of bytes read. Every byte it returns has been verified against
// m.Digest.
//
// ReadAt follows io.ReaderAt's EOF convention: n < len(p) only when the
// read reaches the end of the member (err == io.EOF) or fails (err says
// why, and p[:n] holds verified bytes). A read that fills p exactly up to
// the end of the member returns n == len(p) and a nil error; len(p) == 0
// returns 0, nil at any offset. A canceled ctx makes ReadAt return
// ctx.Err() promptly, while a flight it started goes on for other readers.
// The blocks ReadAt loads are bounded by Config.ReadTimeout from its start
// (ErrReadTimeout); a block whose call it joined and which failed for a
// reason that may pass is loaded once more within that time. A block whose
// read failed for a reason that may pass less than failWindow ago fails at
// once, with that failure.
func (r *Reader) ReadAt(ctx context.Context, m *Member, p []byte, off int64) (int, error) {
	sp, n, err := r.Slices(ctx, m, off, len(p))
	k := 0
	for _, v := range sp.Vecs() {
		k += copy(p[k:], v)
	}
	sp.Release()
	return n, err
}

// Slices is ReadAt without the copy: it returns the verified bytes of m
// in [off, off+n) as a Span of sub-slices of pool blocks, in order, and
// their total length. The Span holds the blocks (pool.Reader) until its
// Release, which the caller must call once it is done with the bytes (a
// FUSE reply: once the kernel has them); the bytes are shared with the
// caches and other readers and must never be modified. The EOF convention
// and the errors are ReadAt's: a total < n comes with io.EOF at the end of
// the member or with the error that stopped the read (the Span then holds
// the verified bytes before it). The Span is never nil.
func (r *Reader) Slices(ctx context.Context, m *Member, off int64, n int) (*Span, int, error) {
	sp := &Span{h: pool.Reader}
	if err := check(m, off); err != nil {
		return sp, 0, err
	}
	switch {
	case n <= 0:
		return sp, 0, nil
	case off >= m.Size:
		return sp, 0, io.EOF
	}
	if !r.enter() {
		return sp, 0, fmt.Errorf("%w: read of %s", ErrClosed, m.Path)
	}
	defer r.reads.Done()
	start := time.Now()
	end := min(off+int64(n), m.Size)
	first, last := off/BlockSize, (end-1)/BlockSize
	r.readahead(m, first, last)
	// Every block's call is started before the first is waited for, so
	// that the blocks of a read that spans several load in parallel.
	pds := make([]pending, 0, last-first+1)
	for i := first; i <= last; i++ {
		pds = append(pds, r.pend(m, i, start))
	}
	got := 0
	for j := range pds {
		i := first + int64(j)
		b, err := r.get(ctx, m, i, pds[j], start)
		if err != nil {
			for _, pd := range pds[j+1:] {
				pd.drop()
			}
			r.st.bytesServed.Add(int64(got))
			return sp, got, err
		}
		bo := i * BlockSize
		// A block read ahead gives its room back once a read has its tail:
		// its reader is past it. Put back into the memory tier, it stays
		// for a straggling read of its head; a reader whose reads do not
		// line up with blocks would otherwise fetch it twice.
		if end >= bo+int64(b.Len()) && r.budget.release(key(m, i)) {
			r.mem.Put(key(m, i), b)
		}
		got += sp.add(b, int(max(off, bo)-bo), int(min(end, bo+int64(b.Len()))-bo))
	}
	r.st.bytesServed.Add(int64(got))
	if got < n {
		return sp, got, io.EOF
	}
	return sp, got, nil
}

// check refuses a read of m at off that can have no answer.
func check(m *Member, off int64) error {
	switch {
	case off < 0:
		return fmt.Errorf("blocks: %s: negative offset %d", m.Path, off)
	case m.Size < 0:
		return fmt.Errorf("blocks: %s: negative size %d", m.Path, m.Size)
	}
	return nil
}

// pending is a block that is either at hand (a memory hit, held for
// the read: pool.Reader) or loading, or whose read failed a moment ago
// (err, the failure remembered), or that has events owed (Reader.settle),
// which must be recorded before it is read.
type pending struct {
	b    *pool.Block
	c    *lru.Call[*pool.Block]
	h    *handoff // the read started c's run: its reference to the block
	err  error
	owed bool
}

// drop releases what pd holds, for a read that will not get to it.
func (pd pending) drop() {
	if pd.b != nil {
		pd.b.Release(pool.Reader)
	}
	if pd.h != nil {
		pd.h.drop()
	}
}

// pend returns that block i of m has events owed, or else the block from
// the memory tier, or else the failure of a read of i that failed for a
// reason that may pass less than failWindow ago (Reader.fails), or else
// its call, a run's; a miss of a sequential reader starts a
// run over i's group of blocks. The run ends ReadTimeout after start.
func (r *Reader) pend(m *Member, i int64, start time.Time) pending {
	if r.owed.has(key(m, i)) {
		return pending{owed: true}
	}
	if b, ok := r.memGet(m, i); ok {
		return pending{b: b}
	}
	if err := r.fails.recent(key(m, i)); err != nil {
		return pending{err: err}
	}
	lo, hi := i, i
	seq := r.sequential(m)
	if seq {
		// From i on: the blocks of the group behind a sequential
		// reader were read already, and with many readers the memory
		// tier has let them go; fetching them again is pure waste.
		_, hi = runBounds(i, int64(r.cfg.SpanBlocks), numBlocks(m.Size), 0)
	}
	cs, first, h := r.startRun(m, i, lo, hi, hi, runRead, putOnDisk(seq, m.Size, r.disk.Limit()), start)
	return pending{c: cs[i-first], h: h}
}

// maxLost bounds how often get starts over for a block whose load ended
// but which left every cache before the read could take a reference
// (callRef): only a pool far too small for its readers loses a block
// so often.
const maxLost = 8

// get returns block i of m from pd, waiting for its call or for ctx; a
// block with events owed has them recorded first (settle) and is pended
// again, and fails if they cannot be. If
// the call started before the read (at start; another read or readahead
// started it) and failed for a reason that may pass, it may have started
// during a fault that is over: get starts or joins a fresh call, once,
// that ends by the read's own deadline (start + ReadTimeout), so that no
// read waits longer than that. A failure that may pass which the read
// then returns (not ctx's, not one pend remembered) is remembered for
// failWindow: the kernel reads a page once more after its read failed,
// and that read, or any other of the block within the window, fails at
// once instead of waiting a read timeout again.
func (r *Reader) get(ctx context.Context, m *Member, i int64, pd pending, start time.Time) (*pool.Block, error) {
	for lost := 0; ; lost++ {
		for pd.owed {
			if err := r.settle(ctx, m, i); err != nil {
				return nil, err
			}
			pd = r.pend(m, i, start)
		}
		switch {
		case pd.err != nil:
			return nil, pd.err
		case pd.c == nil:
			return pd.b, nil
		}
		b, err := waitPending(ctx, pd)
		if errors.Is(err, errLost) && lost < maxLost {
			r.st.lost.Add(1)
			pd = r.pend(m, i, start)
			continue
		}
		if err == nil {
			return b, nil
		}
		if pd.c.Started().Before(start) && passing(err) && ctx.Err() == nil && time.Since(start) < r.cfg.ReadTimeout {
			r.st.freshFlights.Add(1)
			cs, first, h := r.startRun(m, i, i, i, i, runRead, putOnDisk(false, m.Size, r.disk.Limit()), start)
			b, err = waitPending(ctx, pending{c: cs[i-first], h: h})
		}
		if err != nil && ctx.Err() == nil && passing(err) {
			r.fails.add(key(m, i), err)
		}
		return b, err
	}
}

// passing reports whether a load that failed with err may succeed if it is
// tried again: not for a verification failure, an event not recorded, a
// closed Reader or a permanent store answer.
func passing(err error) bool {
	return !permanent(err) && !errors.Is(err, b3.ErrMismatch) && !errors.Is(err, ErrNotRecorded) &&
		!errors.Is(err, ErrClosed) && !errors.Is(err, errLost)
}

// memGet returns block i of m from the memory tier, held for the read
// (pool.Reader), and counts a memory hit: for a block about to be served.
func (r *Reader) memGet(m *Member, i int64) (*pool.Block, bool) {
	b, ok := r.memBlock(m, i)
	if ok {
		r.st.memHits.Add(1)
	}
	return b, ok
}

// memBlock returns block i of m from the memory tier, or loaded ahead
// and held by the budget, held for the caller (pool.Reader), without
// counting a hit. A cached block of another length than m's block i (a
// manifest that gives the same digest another size) is not used.
func (r *Reader) memBlock(m *Member, i int64) (*pool.Block, bool) {
	b, ok := r.mem.Get(key(m, i), pool.Reader)
	if !ok {
		b, ok = r.budget.loaded(key(m, i))
	}
	if !ok {
		return nil, false
	}
	if _, n := blockRange(m, i); int64(b.Len()) != n {
		b.Release(pool.Reader)
		return nil, false
	}
	return b, true
}

func key(m *Member, i int64) cache.Key { return cache.Key{Digest: m.Digest, Index: i} }
