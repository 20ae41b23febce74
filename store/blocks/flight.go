package blocks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/b3"
)

// flight is one shared load of one block, which ends by deadline. data
// and err are written once, before done is closed, and only read after it.
type flight struct {
	done     chan struct{}
	deadline time.Time
	data     []byte
	err      error
}

// source says where a loaded block came from.
type source int

const (
	fromMem source = iota
	fromDisk
	fromNetwork
)

// pending is a block that is either at hand (a memory hit) or loading.
type pending struct {
	b []byte
	f *flight
}

// pend returns block i of m from the memory tier, or else its flight; a
// missing block of a sequential reader starts a span. A flight it starts
// ends by deadline.
func (r *Reader) pend(m *Member, i int64, deadline time.Time) pending {
	if b, ok := r.memGet(m, i); ok {
		return pending{b: b}
	}
	if r.cfg.SpanBlocks > 1 && r.sequential(m) {
		f, _ := r.startSpan(m, i, 0, false, deadline)
		return pending{f: f}
	}
	return pending{f: r.start(m, i, false, deadline)}
}

// get returns block i of m from pd, waiting for its flight or for ctx. If
// the flight started before the read (another read or readahead started
// it: its deadline is earlier) and failed for a reason that may pass, it
// may have started during a fault that is over: get starts or joins a
// fresh flight, once, that ends by the read's own deadline.
func (r *Reader) get(ctx context.Context, m *Member, i int64, pd pending, deadline time.Time) ([]byte, error) {
	if pd.f == nil {
		return pd.b, nil
	}
	b, err := wait(ctx, pd.f)
	if err == nil || !pd.f.deadline.Before(deadline) || !passing(err) || ctx.Err() != nil || !time.Now().Before(deadline) {
		return b, err
	}
	r.st.freshFlights.Add(1)
	return wait(ctx, r.start(m, i, false, deadline))
}

// passing reports whether a load that failed with err may succeed if it is
// tried again: not for a verification failure, an event not recorded, a
// closed Reader or a permanent store answer.
func passing(err error) bool {
	return !permanent(err) && !errors.Is(err, b3.ErrMismatch) && !errors.Is(err, ErrNotRecorded) &&
		!errors.Is(err, ErrClosed)
}

// memGet returns block i of m from the memory tier. A cached block of
// another length than m's block i (a manifest that gives the same digest
// another size) is not used.
func (r *Reader) memGet(m *Member, i int64) ([]byte, bool) {
	_, n := blockRange(m, i)
	if b, ok := r.recent.get(key(m, i)); ok && int64(len(b)) == n {
		r.st.memHits.Add(1)
		return b, true
	}
	if r.mem == nil {
		return nil, false
	}
	b, ok := r.mem.Get(key(m, i))
	if !ok || int64(len(b)) != n {
		return nil, false
	}
	r.st.memHits.Add(1)
	return b, true
}

// wait returns the result of flight f, or ctx.Err() if ctx ends first.
func wait(ctx context.Context, f *flight) ([]byte, error) {
	select {
	case <-f.done:
		return f.data, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// start returns the flight of block i of m. It starts one, which ends by
// deadline, if there is none or if the one there has failed (a read that
// finds one counts as joined). A readahead start (ahead) only starts a
// flight if a readahead token is free, and returns nil otherwise. The
// flight gets a copy of *m.
func (r *Reader) start(m *Member, i int64, ahead bool, deadline time.Time) *flight {
	k := key(m, i)
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.flights[k]; ok && !f.failed() {
		if !ahead {
			r.st.joined.Add(1)
		}
		return f
	}
	if r.closed {
		f := &flight{done: make(chan struct{}), err: ErrClosed, deadline: deadline}
		close(f.done)
		return f
	}
	if ahead {
		select {
		case r.ahead <- struct{}{}:
			r.st.readaheads.Add(1)
		default:
			return nil
		}
	}
	f := &flight{done: make(chan struct{}), deadline: deadline}
	r.flights[k] = f
	r.wg.Add(1)
	mm := *m
	go r.fly(f, &mm, i, ahead)
	return f
}

// failed reports whether f has ended with an error.
func (f *flight) failed() bool {
	select {
	case <-f.done:
		return f.err != nil
	default:
		return false
	}
}

// forget removes the flights fs of blocks i, i+1, ... of m, unless a newer
// flight has taken a block's place.
func (r *Reader) forget(m *Member, i int64, fs ...*flight) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for j, f := range fs {
		k := key(m, i+int64(j))
		if r.flights[k] == f {
			delete(r.flights, k)
		}
	}
}

// fly runs flight f on the Reader's context. Waiters are released as soon
// as the block is verified (and offered to the memory tier); the flight
// stays registered until the block is in the disk tier and the memory tier
// has applied it, so that a reader arriving in between joins the finished
// flight instead of fetching again.
func (r *Reader) fly(f *flight, m *Member, i int64, ahead bool) {
	defer r.wg.Done()
	if ahead {
		defer func() { <-r.ahead }()
	}
	ctx, cancel := context.WithDeadline(r.ctx, f.deadline)
	defer cancel()
	data, src, err := r.load(ctx, m, i)
	r.complete(f, m, i, data, src, err)
	if r.mem != nil && src != fromMem && err == nil {
		r.mem.Wait()
	}
	r.forget(m, i, f)
}

// load returns the verified bytes of block i of m and where they came from.
// It looks in the memory tier again (a flight that just finished may have
// filled it), then in the disk tier, then fetches from the store. ctx is
// the flight's context: the Reader's, with the read deadline.
func (r *Reader) load(ctx context.Context, m *Member, i int64) ([]byte, source, error) {
	k := key(m, i)
	off, n := blockRange(m, i)
	if b, ok := r.memGet(m, i); ok {
		return b, fromMem, nil
	}
	v := &verifier{r: r, m: m, off: off, n: n}
	if err := v.loadOutboard(ctx); err != nil {
		return nil, 0, r.failed(ctx, m, off, n, err)
	}

	if b, ok := r.disk.Get(k); ok {
		err := v.check(ctx, b)
		if err == nil {
			r.st.diskHits.Add(1)
			r.st.verified.Add(1)
			return b, fromDisk, nil
		}
		if !errors.Is(err, b3.ErrMismatch) { // the outboard could not be reloaded
			return nil, 0, r.failed(ctx, m, off, n, err)
		}
		r.disk.Remove(k)
		r.st.mismatches.Add(1)
		if err := r.report(Event{Kind: KindMismatch, Member: m, Off: off, Len: n, From: FromDisk, Err: err}, nil); err != nil {
			return nil, 0, err
		}
	}

	r.st.fetches.Add(1)
	b, err := r.fetch(ctx, m, off, n)
	if err != nil {
		return nil, 0, r.failed(ctx, m, off, n, err)
	}
	if b, err = r.fromNetwork(ctx, v, b, v.verify(b), "first copy"); err != nil {
		return nil, 0, err
	}
	r.st.verified.Add(1)
	return b, fromNetwork, nil
}

// fromNetwork settles a copy b of v's block fetched from the store, which
// v.verify answered with bad, and returns the verified bytes or the
// error (already reported) to give the readers. what names the copy in
// events ("first copy", "copy in a span request"). A bad copy is checked
// once more against a reloaded outboard (check), then fetched again alone,
// as the bytes may have been damaged on the way. One "mismatch" event
// From "network" is reported once the outcome is known: healed if the
// refetched copy verifies, and otherwise the failure, which the read then
// returns (wrapping b3.ErrMismatch); a refetch that fails for a storage
// reason reports the mismatch and then the fetch failure. As everywhere,
// an event that cannot be recorded fails the read (ErrNotRecorded).
func (r *Reader) fromNetwork(ctx context.Context, v *verifier, b []byte, bad error, what string) ([]byte, error) {
	m, off, n := v.m, v.off, v.n
	err := v.recheck(ctx, b, bad)
	switch {
	case err == nil:
		return b, nil
	case !errors.Is(err, b3.ErrMismatch): // the outboard could not be reloaded
		return nil, r.failed(ctx, m, off, n, err)
	}
	r.st.mismatches.Add(1)
	ev := Event{Kind: KindMismatch, Member: m, Off: off, Len: n, From: FromNetwork}
	b, ferr := r.fetch(ctx, m, off, n)
	if ferr != nil {
		ev.Err = fmt.Errorf("%s failed verification (%w), fetching the block again failed: %v", what, err, ferr)
		if rerr := r.report(ev, nil); rerr != nil {
			return nil, rerr
		}
		return nil, r.failed(ctx, m, off, n, ferr)
	}
	if err := v.verify(b); err != nil {
		r.st.mismatches.Add(1)
		err = fmt.Errorf("blocks: %s (%v) bytes %d+%d, %s and the refetched copy failed verification: %w", m.Path, m.Object, off, n, what, err)
		ev.Err = err
		return nil, r.report(ev, err)
	}
	// Healed, but every integrity problem goes to the run record.
	ev.Err = fmt.Errorf("%s failed verification, the refetched copy verified (healed): %w", what, b3.ErrMismatch)
	if err := r.report(ev, nil); err != nil {
		return nil, err
	}
	return b, nil
}

// failed reports a storage failure of the byte range off+n of m, unless
// the Reader is closing, and returns the error to give the readers.
func (r *Reader) failed(ctx context.Context, m *Member, off, n int64, err error) error {
	err = fmt.Errorf("blocks: %s (%v) bytes %d+%d: %w", m.Path, m.Object, off, n, err)
	if r.ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	if ctx.Err() != nil && !errors.Is(err, ErrReadTimeout) {
		// The deadline passed in a step that does not say so itself.
		err = fmt.Errorf("%w (%v): %v", ErrReadTimeout, r.cfg.ReadTimeout, err)
	}
	kind := KindFetchFailed
	if errors.Is(err, store.ErrNotFound) && !errors.Is(err, errOutboard) {
		kind = KindVersionMissing
	}
	return r.report(Event{Kind: kind, Member: m, Off: off, Len: n, Err: err}, err)
}

// wholeMember reports whether m is a single block: such a member is
// fetched whole and verified against its BLAKE3 digest directly, which
// saves a request for its outboard (small files are read in one request).
func wholeMember(m *Member) bool { return m.Size <= BlockSize }

// verifier verifies the blocks of one load against the member's outboard.
// It reloads the outboard from the store (fresh) at most once per load.
type verifier struct {
	r        *Reader
	m        *Member
	off, n   int64
	outboard []byte
	reloaded bool
}

func (v *verifier) loadOutboard(ctx context.Context) error {
	if wholeMember(v.m) {
		return nil // verified by its digest alone, no outboard to fetch
	}
	ob, err := v.r.outboard(ctx, v.m, false)
	v.outboard = ob
	return err
}

// verify checks b against the current outboard. A block of the wrong
// length is a mismatch too: a truncated block that ends on a group boundary
// would otherwise verify as a shorter range.
func (v *verifier) verify(b []byte) error {
	if int64(len(b)) != v.n {
		return fmt.Errorf("block of %d bytes, want %d: %w", len(b), v.n, b3.ErrMismatch)
	}
	if wholeMember(v.m) {
		if b3.Of(b) != v.m.Digest {
			return fmt.Errorf("member of %d bytes: %w", len(b), b3.ErrMismatch)
		}
		return nil
	}
	if len(v.outboard) != b3.OutboardSize(v.m.Size) {
		return fmt.Errorf("outboard of %d bytes, want %d: %w", len(v.outboard), b3.OutboardSize(v.m.Size), b3.ErrMismatch)
	}
	return b3.Verify(v.m.Digest, v.outboard, v.m.Size, v.off, b)
}

// check verifies b, and on a mismatch reloads the outboard (once per load)
// and, if the store's outboard differs from the one used, verifies b again.
// It returns an error wrapping b3.ErrMismatch if b is bad, or another error
// if the outboard could not be reloaded.
func (v *verifier) check(ctx context.Context, b []byte) error {
	return v.recheck(ctx, b, v.verify(b))
}

// recheck is check for a b that v.verify has already answered with err.
func (v *verifier) recheck(ctx context.Context, b []byte, err error) error {
	if err == nil || v.reloaded || wholeMember(v.m) {
		return err
	}
	v.reloaded = true
	ob, oerr := v.r.outboard(ctx, v.m, true)
	if oerr != nil {
		return oerr
	}
	if bytes.Equal(ob, v.outboard) {
		return err
	}
	v.outboard = ob
	return v.verify(b)
}
