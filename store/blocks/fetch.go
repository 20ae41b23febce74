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
)

// errStalled reports a request cut off after StallTimeout without a byte.
var errStalled = errors.New("no bytes received within the stall timeout")

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

// fetch reads the n bytes of m at off from the store. A request that fails
// after delivering some bytes is resumed from the first missing byte.
// Every request waits for a slot of the Reader's limiter first; a
// throttled answer slows the limiter down. Every failure that may pass
// (throttling, 5xx, refused or reset connections, timeouts, stalls, a
// body cut short) is retried with jittered exponential backoff until ctx's
// deadline (the read timeout), or, if Config.Attempts is set, until that
// many requests failed other than by throttling; a permanent answer (the
// version is gone, access denied, another version) fails at once. ctx is
// the flight's context (the Reader's, with the read deadline): a request
// is never canceled because one reader gave up.
func (r *Reader) fetch(ctx context.Context, m *Member, off, n int64) ([]byte, error) {
	if err := m.Object.Validate(); err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	have, failures := 0, 0
	var last error // the last failure, for a read that times out
	for attempt := 1; ; attempt++ {
		if err := r.lim.wait(ctx); err != nil {
			return nil, r.stopped(ctx, last)
		}
		r.st.requests.Add(1)
		got, err := r.request(ctx, m.Object, off+int64(have), buf[have:])
		have += got
		switch {
		case have == len(buf):
			r.lim.ok()
			return buf, nil
		case err == nil:
			err = io.ErrUnexpectedEOF
		}
		if ctx.Err() != nil {
			return nil, r.stopped(ctx, last)
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
		if permanent(err) || r.cfg.Attempts > 0 && failures >= r.cfg.Attempts {
			return nil, fmt.Errorf("%v: request %d (%d failed): %w", m.Object, attempt, failures, err)
		}
		r.st.retries.Add(1)
		if got >= resumeAtOnce {
			continue // the connection was cut, not refused: resume at once
		}
		if err := r.sleep(ctx, r.backoff(attempt)); err != nil {
			return nil, r.stopped(ctx, last)
		}
	}
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

// minBackoff is the floor of every wait before a retry, whatever
// Config.Backoff says, so that no retry loop can spin.
const minBackoff = time.Millisecond

// backoff returns the wait after the attempt-th failed request: Backoff
// doubled attempt-1 times, at most MaxBackoff, with the upper half
// jittered, and never less than minBackoff.
func (r *Reader) backoff(attempt int) time.Duration {
	d := r.cfg.Backoff << min(attempt-1, 30)
	if d <= 0 || d > r.cfg.MaxBackoff {
		d = r.cfg.MaxBackoff
	}
	return max(d/2+rand.N(d/2+1), minBackoff)
}

// request makes one ranged read of len(buf) bytes of obj at off into buf
// and returns how many bytes arrived. A watchdog cancels the request and
// closes its body when StallTimeout passes without a byte; the error then
// wraps errStalled.
func (r *Reader) request(ctx context.Context, obj store.Object, off int64, buf []byte) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &watchdog{cancel: cancel}
	t := time.AfterFunc(r.cfg.StallTimeout, w.fire)
	defer t.Stop()
	defer w.close()

	rc, err := r.cfg.Objects.ReadRange(ctx, obj, off, int64(len(buf)))
	if err != nil {
		return 0, w.explain(err, 0)
	}
	w.setBody(rc)
	have := 0
	for have < len(buf) {
		n, err := rc.Read(buf[have:])
		if n > 0 {
			have += n
			t.Reset(r.cfg.StallTimeout)
		}
		if err == io.EOF && have < len(buf) {
			err = io.ErrUnexpectedEOF
		}
		if err != nil && have < len(buf) {
			return have, w.explain(err, have)
		}
	}
	return have, nil
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
func (w *watchdog) explain(err error, have int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fired {
		return fmt.Errorf("%w after %d bytes (%v)", errStalled, have, err)
	}
	return err
}
