package s3store

import (
	"sync"
	"sync/atomic"
	"time"
)

// workers runs the SDK's calls on goroutines that outlive them. A call
// through aws-sdk-go-v2 runs some fifty middleware frames deep (endpoint
// rules, signing, retries), and a goroutine starts with a small stack:
// a fresh goroutine per block fetch (store/blocks starts one per run)
// grows its stack several times on every GET, copying it each time, which
// cost about 7% of the daemon's CPU reading small files. A worker keeps
// the stack its last call grew. grpc-go's server workers
// (ServerOption NumStreamWorkers) exist for the same reason.
//
// There is no bound: a call that finds no idle worker starts one, so the
// pool never limits how many requests are in flight. A worker idle for
// workerIdle exits.
type workers struct {
	work chan call // taken by idle workers

	// mu guards idle, the workers waiting on work that no call has
	// claimed. A call that claims one (idle--) then sends on work, and
	// some idle worker takes it; a worker that times out leaves only if
	// it can unclaim itself, otherwise a call is on its way to it.
	mu   sync.Mutex
	idle int

	idleFor time.Duration // workerIdle; a test's shorter
	started atomic.Int64  // workers started, for tests
}

// call is one function for a worker and the channel it closes when the
// function has returned.
type call struct {
	f    func()
	done chan struct{}
}

// workerIdle is how long an idle worker waits for another call.
const workerIdle = 10 * time.Second

func newWorkers() *workers { return &workers{work: make(chan call), idleFor: workerIdle} }

// do runs f on an idle worker, or on a new one, and returns when f has
// returned. The caller's context is f's business: do itself never waits
// for anything but f. A nil *workers runs f on the caller's goroutine.
func (w *workers) do(f func()) {
	if w == nil {
		f()
		return
	}
	c := call{f, make(chan struct{})}
	if w.claim() {
		w.work <- c
	} else {
		w.started.Add(1)
		go w.loop(c)
	}
	<-c.done
}

// claim takes one idle worker off the count and reports whether there was
// one.
func (w *workers) claim() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.idle == 0 {
		return false
	}
	w.idle--
	return true
}

// loop runs c, then the calls handed to it, until it has been idle for
// idleFor. It counts itself idle before it says a call is done, so
// that a caller that makes its next call at once finds it.
func (w *workers) loop(c call) {
	t := time.NewTimer(w.idleFor)
	defer t.Stop()
	for {
		c.f()
		w.mu.Lock()
		w.idle++
		w.mu.Unlock()
		close(c.done)
		t.Reset(w.idleFor)
		select {
		case c = <-w.work:
			continue
		case <-t.C:
		}
		if w.claim() { // unclaimed: no call is on its way
			return
		}
		c = <-w.work // a call claimed this worker as it timed out
	}
}
