package blocks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/b3"
)

// errStalled reports a request cut off after StallTimeout without a byte.
var errStalled = store.ErrStalled

// permanent reports whether err cannot be cured by asking again.
func permanent(err error) bool {
	for _, s := range []error{store.ErrNotFound, store.ErrAccessDenied, store.ErrVersionMismatch,
		store.ErrNoVersion, store.ErrUnversioned, store.ErrBadResponse} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// resumeAtOnce is the least a cut-off request must have delivered for
// the rest to be asked for at once; a request that delivered less is
// retried after a backoff like one that delivered nothing, so that a
// server cutting every body short cannot make a fetch spin.
const resumeAtOnce = 64 << 10

// retry is the Reader's one retry loop, for block fetches and outboard
// loads alike. It calls try until it succeeds; try returns how many bytes
// its attempt delivered. Before every attempt but the first (and before
// the first too if remote is set: a request to the store rather than a
// load that may be a local copy) it takes a slot of the shared limiter. A
// throttled answer slows the limiter down; another answer from the store
// speeds it up again. Every failure that may pass (throttling, 5xx,
// refused or reset connections, timeouts, stalls, a body cut short) is
// retried with jittered exponential backoff until ctx's deadline (the read
// timeout), or, if Config.Attempts is set, until that many attempts failed
// other than by throttling; an attempt that delivered resumeAtOnce bytes or
// more is followed at once. A permanent answer (the version is gone, access
// denied, another version) or a mismatch fails at once.
func (r *Reader) retry(ctx context.Context, remote bool, try func() (got int64, err error)) error {
	failures := 0
	var last error // the last failure, for a load that times out
	for attempt := 1; ; attempt++ {
		if attempt > 1 || remote {
			if err := r.lim.wait(ctx); err != nil {
				return r.stopped(ctx, last)
			}
		}
		got, err := try()
		if err == nil {
			if remote {
				r.lim.ok()
			}
			return nil
		}
		if ctx.Err() != nil {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				last = err
			}
			return r.stopped(ctx, last)
		}
		last = err
		switch {
		case errors.Is(err, store.ErrThrottled):
			r.lim.throttled()
		case got > 0:
			r.lim.ok()
			failures++
		default:
			failures++
		}
		if permanent(err) || errors.Is(err, b3.ErrMismatch) || r.cfg.Attempts > 0 && failures >= r.cfg.Attempts {
			return fmt.Errorf("try %d (%d failed): %w", attempt, failures, err)
		}
		r.st.retries.Add(1)
		if got >= resumeAtOnce {
			continue // the connection was cut, not refused: resume at once
		}
		if err := r.sleep(ctx, r.backoff(attempt)); err != nil {
			return r.stopped(ctx, last)
		}
	}
}

// fetch reads the bytes of m from off on into bufs (from: which copy,
// see open), consecutive buffers
// that the bytes fill in order, calling progress (if not nil) whenever
// bytes arrive with the number delivered so far. A request that fails
// after delivering some bytes is resumed from the first missing byte;
// retries are retry's. ctx is the flight's context (the Reader's, with
// the read deadline): a request is never canceled because one reader
// gave up.
func (r *Reader) fetch(ctx context.Context, m *Member, off int64, bufs [][]byte, progress func(have int64), from copyFrom) error {
	obj := m.Object
	if err := obj.Validate(); err != nil {
		return err
	}
	d := &recv{bufs: bufs}
	for _, b := range bufs {
		d.total += int64(len(b))
	}
	err := r.retry(ctx, true, func() (int64, error) {
		r.st.requests.Add(1)
		before := d.have
		err := r.request(ctx, m, off, d, progress, from)
		if err == nil && d.have < d.total {
			err = io.ErrUnexpectedEOF
		}
		if from == cachedCopy && r.cfg.Content != nil && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, errStalled)) {
			// The tier's copy may be a truncated cache file, at whose end
			// the tier stalls (nginx) or closes: the rest comes past it.
			from = bypassCopy
		}
		return d.have - before, err
	})
	if err != nil {
		return fmt.Errorf("%v: %w", obj, err)
	}
	return nil
}

// open sends the ranged request for length bytes of m from off: the
// fallback store's copy through Config.Fallback for fallbackCopy; else by
// content through Config.Content if set (bypassCopy: bypassing the tier's
// cache), else to Config.Objects at m's pinned version.
func (r *Reader) open(ctx context.Context, m *Member, off, length int64, from copyFrom) (io.ReadCloser, error) {
	if from != fallbackCopy && r.cfg.Content == nil {
		return r.cfg.Objects.ReadRange(ctx, m.Object, off, length)
	}
	c := store.Content{Object: m.Object, Digest: m.Digest.String(), Size: m.Size, Snapshot: m.Snapshot, Index: m.Index}
	if from == fallbackCopy {
		return r.cfg.Fallback.ReadContent(ctx, c, off, length, false)
	}
	return r.cfg.Content.ReadContent(ctx, c, off, length, from == bypassCopy)
}

// recv is the receive buffers of a fetch and how far they are filled:
// bufs[i][o:] is the next space to read into.
type recv struct {
	bufs        [][]byte
	have, total int64
	i, o        int
}

func (d *recv) next() []byte { return d.bufs[d.i][d.o:] }

func (d *recv) add(n int) {
	d.have += int64(n)
	d.o += n
	for d.i < len(d.bufs) && d.o == len(d.bufs[d.i]) {
		d.i, d.o = d.i+1, 0
	}
}

// request makes one ranged read of the bytes of obj that d still lacks
// (obj's bytes from off on fill d) and reads them into d. A watchdog
// cancels the request and closes its body when StallTimeout passes
// without a byte; the error then wraps errStalled, which is also the
// cause of the request's context (so a store can tell a stall from a
// reader that gave up: store/fallback).
func (r *Reader) request(ctx context.Context, m *Member, off int64, d *recv, progress func(int64), from copyFrom) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w := &watchdog{cancel: func() { cancel(errStalled) }}
	t := time.AfterFunc(r.cfg.StallTimeout, w.fire)
	defer t.Stop()
	defer w.close()

	rc, err := r.open(ctx, m, off+d.have, d.total-d.have, from)
	if err != nil {
		return w.explain(err, 0)
	}
	w.setBody(rc)
	start := d.have
	for d.have < d.total {
		n, err := rc.Read(d.next())
		if n > 0 {
			t.Reset(r.cfg.StallTimeout)
			d.add(n)
			if progress != nil {
				progress(d.have)
				t.Reset(r.cfg.StallTimeout)
			}
		}
		if err == io.EOF && d.have < d.total {
			err = io.ErrUnexpectedEOF
		}
		if err != nil && d.have < d.total {
			return w.explain(err, d.have-start)
		}
	}
	return nil
}

// watchdog cuts off a stalled request. Its methods are safe for concurrent
// use: fire runs on a timer goroutine.
type watchdog struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	fired  bool
	body   io.Closer
	closed bool
}

func (w *watchdog) fire() {
	w.mu.Lock()
	w.fired = true
	w.mu.Unlock()
	w.cancel()
	w.close()
}

// setBody registers the response body, closing it at once if the watchdog
// has already fired.
func (w *watchdog) setBody(b io.Closer) {
	w.mu.Lock()
	w.body = b
	fired := w.fired
	w.mu.Unlock()
	if fired {
		w.close()
	}
}

// close closes the body once.
func (w *watchdog) close() {
	w.mu.Lock()
	b := w.body
	if w.closed || b == nil {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.mu.Unlock()
	b.Close()
}

// explain returns err, or errStalled if the watchdog cut the request off.
func (w *watchdog) explain(err error, have int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fired {
		return fmt.Errorf("%w after %d bytes (%v)", errStalled, have, err)
	}
	return err
}

// minBackoff is the floor of every wait before a retry, whatever
// Config.Backoff says, so that no retry loop can spin.
const minBackoff = time.Millisecond

// backoff returns the wait after the attempt-th failed attempt: Backoff
// doubled attempt-1 times, at most MaxBackoff, with the upper half
// jittered, and never less than minBackoff.
func (r *Reader) backoff(attempt int) time.Duration {
	d := r.cfg.Backoff << min(attempt-1, 30)
	if d <= 0 || d > r.cfg.MaxBackoff {
		d = r.cfg.MaxBackoff
	}
	return max(d/2+rand.N(d/2+1), minBackoff)
}

// sleep waits for d before a retry, or fails with ctx.Err() if ctx ends
// first. A d that would end after ctx's deadline is cut to half the time
// left, so that one more try fits; if that is less than Config.Backoff,
// sleep fails at once with errNoSlot.
func (r *Reader) sleep(ctx context.Context, d time.Duration) error {
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); d > left {
			if d = left / 2; d < r.cfg.Backoff {
				return errNoSlot
			}
		}
	}
	return pause(ctx, d)
}

// pause waits for d, or returns ctx.Err() if ctx ends first.
func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopped returns the error of a load that stops before its answer: the
// Reader's context if it is closing, or else an error wrapping
// ErrReadTimeout and last, the load's last failure (if it is not a context
// error, which would read as an interrupt).
func (r *Reader) stopped(ctx context.Context, last error) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	switch {
	case last == nil:
		return fmt.Errorf("%w (%v): no answer from the store in time", ErrReadTimeout, r.cfg.ReadTimeout)
	case errors.Is(last, context.Canceled) || errors.Is(last, context.DeadlineExceeded):
		return fmt.Errorf("%w (%v): %v", ErrReadTimeout, r.cfg.ReadTimeout, last)
	}
	return fmt.Errorf("%w (%v); last failure: %w", ErrReadTimeout, r.cfg.ReadTimeout, last)
}
