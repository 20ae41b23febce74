package httpstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pinfs/pinfs/store"
)

// The defaults of SetTimeouts: those of pinfs mount's --stall-timeout and
// --read-timeout (and of store/blocks).
const (
	DefaultStallTimeout = 30 * time.Second
	DefaultReadTimeout  = 60 * time.Second
)

// ErrReadTimeout is the cause of a metadata read (Get) cut off because it
// did not end within the read timeout (SetTimeouts), and of an Open whose
// answer did not start within it.
var ErrReadTimeout = errors.New("no whole answer from the tier within the read timeout")

// timeouts are a Store's bounds on its metadata reads.
type timeouts struct {
	stall, read atomic.Int64 // time.Duration
}

// SetTimeouts sets the bounds of the metadata reads (Get, GetAtMost,
// Open): a read whose answer delivers no byte for stall is cut off with
// an error wrapping store.ErrStalled, and a Get that has not read its
// whole answer within read is cut off with one wrapping ErrReadTimeout
// (an Open, whose member table may be large, must have its answer's
// header within read; its body is then bounded by stall alone). A
// duration <= 0 leaves the bound as it is (by default
// DefaultStallTimeout and DefaultReadTimeout). Member bytes
// (ReadContent) have their own bounds, the block reader's. SetTimeouts
// is safe to call at any time; reads that have started keep their bounds.
func (s *Store) SetTimeouts(stall, read time.Duration) {
	if stall > 0 {
		s.limits.stall.Store(int64(stall))
	}
	if read > 0 {
		s.limits.read.Store(int64(read))
	}
}

// guard bounds one metadata read: its context ends read after it starts
// (cause ErrReadTimeout) or stall after the last sign of progress (cause
// store.ErrStalled); progress pushes the stall back, headerIn lifts the
// read bound (Open). stop ends it, and its context.
type guard struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	stall  time.Duration

	mu       sync.Mutex
	stallT   *time.Timer
	readT    *time.Timer
	stopped  bool
	progress int64 // bytes delivered
}

// guarded returns the guard of a metadata read on ctx.
func (s *Store) guarded(ctx context.Context) *guard {
	gctx, cancel := context.WithCancelCause(ctx)
	g := &guard{ctx: gctx, cancel: cancel, stall: time.Duration(s.limits.stall.Load())}
	g.stallT = time.AfterFunc(g.stall, func() {
		cancel(fmt.Errorf("%w (%v)", store.ErrStalled, g.stall))
	})
	read := time.Duration(s.limits.read.Load())
	g.readT = time.AfterFunc(read, func() { cancel(fmt.Errorf("%w (%v)", ErrReadTimeout, read)) })
	return g
}

// got records n bytes delivered, which pushes the stall bound back.
func (g *guard) got(n int) {
	if n <= 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.progress += int64(n)
	if !g.stopped {
		g.stallT.Reset(g.stall)
	}
}

// headerIn lifts the read bound: the answer has started (Open).
func (g *guard) headerIn() { g.readT.Stop() }

// stop ends the guard and its context.
func (g *guard) stop() {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
	g.stallT.Stop()
	g.readT.Stop()
	g.cancel(nil)
}

// explain returns err, or, if the guard cut the read off, an error that
// says so and wraps its cause (store.ErrStalled or ErrReadTimeout).
func (g *guard) explain(err error) error {
	if err == nil || g.ctx.Err() == nil {
		return err
	}
	cause := context.Cause(g.ctx)
	if !errors.Is(cause, store.ErrStalled) && !errors.Is(cause, ErrReadTimeout) {
		return err // the caller's own cancellation
	}
	if errors.Is(err, cause) {
		return err
	}
	g.mu.Lock()
	have := g.progress
	g.mu.Unlock()
	return fmt.Errorf("%w, after %d bytes of the body (%v)", cause, have, err)
}

// guardedBody is a response body read under its guard: every byte read
// pushes the stall bound back, an error says why the guard cut it off,
// and Close stops the guard.
type guardedBody struct {
	rc io.ReadCloser
	g  *guard
}

func (b *guardedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.g.got(n)
	if err != nil && err != io.EOF {
		err = b.g.explain(err)
	}
	return n, err
}

func (b *guardedBody) Close() error {
	err := b.rc.Close()
	b.g.stop()
	return err
}
