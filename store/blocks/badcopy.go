package blocks

import (
	"context"
	"errors"
	"fmt"

	"github.com/pinfs/pinfs/store/pool"
	"github.com/pinfs/pinfs/verify/b3"
)

// A bad copy of a block is one that fails verification, or that has the
// wrong length (a Content-Length that is not the block's:
// store/httpstore.ErrWrongLength). Either way it is fetched once more past
// the tier's cache and, if that copy is bad too and the tier has a
// fallback store (Config.Fallback), read from the fallback; one
// "mismatch" event says how it ended (fromNetwork).
//
// A tier's answer that ends early or stalls may be a truncated cache file
// (nginx sends the cached length, then holds the connection open at the
// file's end): fetch resumes it past the tier's cache, which makes the
// tier replace its copy. Its bytes are verified as any others; as none
// failed verification, it is not a mismatch.

// copyFrom says which copy of a member's bytes a request asks for.
type copyFrom int

const (
	cachedCopy   copyFrom = iota // the store's; through a tier, its cached copy
	bypassCopy                   // through a tier, past its cache (tier.BypassHeader)
	fallbackCopy                 // the fallback store's (Config.Fallback)
)

var (
	// errBadLength marks a bad copy of the wrong length, which a reloaded
	// outboard cannot make right (fromNetwork skips the recheck).
	errBadLength = errors.New("a copy of the wrong length")
)

// fromNetwork settles a copy b of block i of v's member fetched from the
// store, which v.verify answered with bad (or a fetch, for a copy of the
// wrong length: errBadLength), and returns the verified bytes or the error
// (already reported) to give the readers. what names the copy in events.
// A bad copy is checked once more against a reloaded outboard (recheck;
// not for a copy of the wrong length), then fetched again alone, as the
// bytes may have been damaged on the way (through Config.Content, past
// the tier's cache). A refetched copy that is bad too is read from
// Config.Fallback, if set. One "mismatch" event From "network" is
// reported once the outcome is known (From "tier" for a copy read through
// Config.Content): healed if a later copy verifies, and otherwise the
// failure, which the read then returns (wrapping b3.ErrMismatch); a
// refetch that fails for a storage reason reports the mismatch and then
// the fetch failure. As everywhere, an event that cannot be recorded fails
// the read (ErrNotRecorded).
//
// blk holds the copy (pool.Flight), which fromNetwork takes over: it
// returns blk or a refetched block in its place, held the same way, or
// releases it.
func (r *Reader) fromNetwork(ctx context.Context, v *verifier, i int64, blk *pool.Block, bad error, what string) (*pool.Block, error) {
	m := v.m
	off, n := blockRange(m, i)
	err := bad
	if !errors.Is(bad, errBadLength) {
		err = v.recheck(ctx, i, blk.Bytes(), bad)
	}
	if err == nil {
		return blk, nil
	}
	blk.Release(pool.Flight)
	if !errors.Is(err, b3.ErrMismatch) { // the outboard could not be reloaded
		return nil, r.failed(ctx, m, i, err)
	}
	r.st.mismatches.Add(1)
	ev := Event{Kind: KindMismatch, Member: m, Off: off, Len: n, From: FromNetwork}
	if r.cfg.Content != nil {
		ev.From = FromTier
	}
	b, ferr := r.refetch(ctx, v, i, bypassCopy)
	if ferr != nil && !errors.Is(ferr, b3.ErrMismatch) {
		ev.Err = fmt.Errorf("%s failed verification (%w), fetching the block again failed: %v", what, err, ferr)
		if rerr := r.report(ev, nil); rerr != nil {
			return nil, rerr
		}
		return nil, r.failed(ctx, m, i, ferr)
	}
	if ferr == nil {
		// Healed, but every integrity problem goes to the run record.
		ev.Err = fmt.Errorf("%s failed verification (%v), the refetched copy verified (healed): %w", what, err, b3.ErrMismatch)
		if err := r.report(ev, nil); err != nil {
			b.Release(pool.Flight)
			return nil, err
		}
		return b, nil
	}
	r.st.mismatches.Add(1)
	err = fmt.Errorf("blocks: %s (%v) bytes %d+%d, %s (%v) and the refetched copy failed verification: %w", m.Path, m.Object, off, n, what, err, ferr)
	if r.cfg.Fallback == nil {
		ev.Err = err
		return nil, r.report(ev, err)
	}
	b, fberr := r.refetch(ctx, v, i, fallbackCopy)
	if fberr != nil {
		err = fmt.Errorf("%w; the fallback store's copy: %v", err, fberr)
		ev.Err = err
		return nil, r.report(ev, err)
	}
	ev.Err = fmt.Errorf("%v; the fallback store's copy verified (healed): %w", err, b3.ErrMismatch)
	if err := r.report(ev, nil); err != nil {
		b.Release(pool.Flight)
		return nil, err
	}
	return b, nil
}

// refetch fetches block i of v's member alone, the copy from says, and
// returns it once it verifies. A copy of the wrong length or that fails
// verification is an error wrapping b3.ErrMismatch.
func (r *Reader) refetch(ctx context.Context, v *verifier, i int64, from copyFrom) (*pool.Block, error) {
	off, n := blockRange(v.m, i)
	blk, err := r.pool.Get(ctx, int(n), pool.Flight)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReadTimeout, err)
	}
	err = r.fetch(ctx, v.m, off, [][]byte{blk.Bytes()}, nil, from)
	if err == nil {
		err = v.verify(i, blk.Bytes())
	}
	if err != nil {
		blk.Release(pool.Flight)
		return nil, err
	}
	return blk, nil
}
