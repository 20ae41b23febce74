package blocks

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/pinfs/pinfs/verify/b3"
)

// errOutboard marks the errors of loading an outboard.
var errOutboard = errors.New("loading outboard")

// wholeMember reports whether m is a single block: such a member is
// fetched whole and verified against its BLAKE3 digest directly, which
// saves a request for its outboard (small files are read in one request).
func wholeMember(m *Member) bool { return m.Size <= BlockSize }

// verifier verifies the blocks of one flight against the member's
// outboard. It reloads the outboard from the store (fresh) at most once.
type verifier struct {
	r        *Reader
	m        *Member
	outboard []byte
	reloaded bool

	// loading is closed once the load goLoad started has set outboard
	// or loadErr; nil if none was started.
	loading chan struct{}
	loadErr error
}

// loadOutboard loads the outboard the blocks are verified with (none for
// a member of one block).
func (v *verifier) loadOutboard(ctx context.Context) error {
	if v.atHand() {
		return nil
	}
	ob, err := v.r.outboard(ctx, v.m, false)
	v.outboard = ob
	return err
}

// atHand reports whether the outboard needs no load: a member of one
// block is verified by its digest alone, and the Reader's cache may hold
// the outboard (which atHand then sets).
func (v *verifier) atHand() bool {
	if wholeMember(v.m) {
		return true
	}
	ob, ok := v.r.obs.Get(v.m.Digest)
	if ok {
		v.outboard = ob
	}
	return ok
}

// goLoad loads the outboard on a goroutine of its own, with ctx (the
// flight's), while the flight's request goes out; for an outboard not at
// hand. When the load ends, outboard (on success) or loadErr is set, then
// done is called with the load's error, then wait returns.
func (v *verifier) goLoad(ctx context.Context, done func(error)) {
	v.loading = make(chan struct{})
	go func() {
		defer close(v.loading)
		ob, err := v.r.outboard(ctx, v.m, false)
		if err != nil {
			v.loadErr = err
		} else {
			v.outboard = ob
		}
		done(err)
	}()
}

// wait waits for the load goLoad started (none: returns at once) and
// returns its error. The load ends by the flight's deadline, or when the
// Reader closes.
func (v *verifier) wait() error {
	if v.loading == nil {
		return nil
	}
	<-v.loading
	return v.loadErr
}

// verify checks b, block i of the member, against the current outboard.
// A block of the wrong length is a mismatch too: a truncated block that
// ends on a group boundary would otherwise verify as a shorter range.
func (v *verifier) verify(i int64, b []byte) error {
	off, n := blockRange(v.m, i)
	if int64(len(b)) != n {
		return fmt.Errorf("block of %d bytes, want %d: %w", len(b), n, b3.ErrMismatch)
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
	return b3.Verify(v.m.Digest, v.outboard, v.m.Size, off, b)
}

// check verifies block i's bytes b, and on a mismatch reloads the outboard
// (once per verifier) and, if the store's outboard differs from the one
// used, verifies b again. It returns an error wrapping b3.ErrMismatch if b
// is bad, or another error if the outboard could not be reloaded.
func (v *verifier) check(ctx context.Context, i int64, b []byte) error {
	return v.recheck(ctx, i, b, v.verify(i, b))
}

// recheck is check for a b that v.verify has already answered with err.
func (v *verifier) recheck(ctx context.Context, i int64, b []byte, err error) error {
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
	return v.verify(i, b)
}

// smallOutboard returns the outboard of a member of at most b3.GroupSize
// bytes, which pinfs does not store: the 8-byte little-endian size alone.
func smallOutboard(size int64) []byte {
	var ob [8]byte
	binary.LittleEndian.PutUint64(ob[:], uint64(size))
	return ob[:]
}

// obKey names one outboard load: a member's digest and whether the load
// bypasses every cached copy.
type obKey struct {
	d     b3.Sum
	fresh bool
}

// outboard returns the outboard of m from the Reader's outboard cache
// (r.obs, least recently used out beyond Config.OutboardBytes), or loads
// it. With fresh it bypasses every cached copy (the Outboards' and this
// Reader's) and replaces the cached copy with what the store holds.
// Concurrent loads of the same member and freshness share one (r.obLoads);
// a load joined that ran out of its own time is tried again in ctx's. ctx
// is the flight's context (the Reader's, with the read deadline).
func (r *Reader) outboard(ctx context.Context, m *Member, fresh bool) ([]byte, error) {
	if m.Size <= b3.GroupSize {
		return smallOutboard(m.Size), nil
	}
	if !fresh {
		if ob, ok := r.obs.Get(m.Digest); ok {
			return ob, nil
		}
	}
	k := obKey{m.Digest, fresh}
	c, own := r.obLoads.Start(k)
	if !own {
		ob, err := c.Wait(ctx)
		switch {
		case ctx.Err() != nil:
			return nil, r.stopped(ctx, nil)
		case errors.Is(err, ErrReadTimeout):
			return r.loadOutboard(ctx, m, fresh)
		}
		return ob, err
	}
	// A load that ended between the cache lookup above and Start has put
	// its outboard into the cache (before it forgot its call): look again.
	ob, ok := r.obs.Get(m.Digest)
	var err error
	if fresh || !ok {
		if ob, err = r.loadOutboard(ctx, m, fresh); err == nil {
			r.obs.Put(m.Digest, ob)
		}
	}
	c.Set(ob, err)
	r.obLoads.Forget(k, c)
	return ob, err
}

// loadOutboard asks Outboards for m's outboard, with the Reader's retry
// loop (retry): every failure that may pass is retried until ctx's
// deadline; a permanent store answer or an outboard of the wrong size
// fails at once. The first try does not wait for the limiter, as it is
// mostly a local copy.
func (r *Reader) loadOutboard(ctx context.Context, m *Member, fresh bool) ([]byte, error) {
	r.st.outboardLoads.Add(1)
	var ob []byte
	err := r.retry(ctx, false, func() (int64, error) {
		var err error
		ob, err = r.cfg.Outboards.Outboard(ctx, m.Digest, m.Size, fresh)
		return 0, err
	})
	if err != nil {
		return nil, fmt.Errorf("%w %v (fresh %v): %w", errOutboard, m.Digest, fresh, err)
	}
	return ob, nil
}
