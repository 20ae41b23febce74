package lru

import (
	"context"
	"sync"
	"time"
)

// Group holds at most one call in flight per key: the first caller starts
// it, later callers join it and wait for its result. A failed call can be
// replaced at once by a new one, so that nobody joins a failure that is
// already known. It is safe for concurrent use; mu guards calls.
type Group[K comparable, V any] struct {
	mu    sync.Mutex
	calls map[K]*Call[V]
}

// Call is one call of a Group. Its result is set once (Set) and read by
// any number of waiters.
type Call[V any] struct {
	started time.Time
	done    chan struct{}
	once    sync.Once
	val     V // written once, before done is closed
	err     error
}

// Start returns k's call in flight and false, or, if there is none or the
// one there has failed, starts a new one and returns it and true: the
// caller then owns it and must Set it and Forget it.
func (g *Group[K, V]) Start(k K) (*Call[V], bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.calls[k]; ok && !c.Failed() {
		return c, false
	}
	if g.calls == nil {
		g.calls = make(map[K]*Call[V])
	}
	c := &Call[V]{started: time.Now(), done: make(chan struct{})}
	g.calls[k] = c
	return c, true
}

// Forget removes c as k's call, unless another call has taken its place.
// Callers that hold c can still wait for it.
func (g *Group[K, V]) Forget(k K, c *Call[V]) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.calls[k] == c {
		delete(g.calls, k)
	}
}

// Len returns the number of calls registered.
func (g *Group[K, V]) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.calls)
}

// Do runs fn as k's call, or joins k's call in flight, and returns its
// result; joined says that another caller ran it. A joiner whose ctx ends
// first returns ctx.Err() while the call goes on.
func (g *Group[K, V]) Do(ctx context.Context, k K, fn func() (V, error)) (v V, err error, joined bool) {
	c, own := g.Start(k)
	if !own {
		v, err = c.Wait(ctx)
		return v, err, true
	}
	defer g.Forget(k, c)
	v, err = fn()
	c.Set(v, err)
	return v, err, false
}

// Finished returns a call that has already ended with v and err.
func Finished[V any](v V, err error) *Call[V] {
	c := &Call[V]{started: time.Now(), done: make(chan struct{})}
	c.Set(v, err)
	return c
}

// Set ends c with v and err and releases its waiters; only the first Set
// counts.
func (c *Call[V]) Set(v V, err error) {
	c.once.Do(func() {
		c.val, c.err = v, err
		close(c.done)
	})
}

// Wait returns c's result, or ctx.Err() if ctx ends first.
func (c *Call[V]) Wait(ctx context.Context) (V, error) {
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

// Done is closed once c has ended.
func (c *Call[V]) Done() <-chan struct{} { return c.done }

// Failed reports whether c has ended with an error.
func (c *Call[V]) Failed() bool {
	select {
	case <-c.done:
		return c.err != nil
	default:
		return false
	}
}

// Started returns when c was started.
func (c *Call[V]) Started() time.Time { return c.started }
