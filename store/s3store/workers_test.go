package s3store

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWorkersReuse: calls made one after another run on one worker, so
// that its grown stack serves them all.
func TestWorkersReuse(t *testing.T) {
	w := newWorkers()
	ran := 0
	for range 100 {
		w.do(func() { ran++ })
	}
	if ran != 100 {
		t.Fatalf("ran %d calls, want 100", ran)
	}
	if n := w.started.Load(); n != 1 {
		t.Fatalf("100 calls one after another started %d workers, want 1", n)
	}
}

// TestWorkersUnbounded: the pool never limits how many calls run at once:
// 64 calls that each wait for all the others all finish.
func TestWorkersUnbounded(t *testing.T) {
	w := newWorkers()
	const n = 64
	var all sync.WaitGroup
	all.Add(n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			w.do(func() {
				all.Done()
				all.Wait() // returns only once all n run at once
			})
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%d concurrent calls did not all run at once (%d workers started)", n, w.started.Load())
	}
}

// TestWorkersNil: a Client made without NewClient runs its calls on the
// caller's goroutine.
func TestWorkersNil(t *testing.T) {
	var w *workers
	ran := false
	w.do(func() { ran = true })
	if !ran {
		t.Fatal("a nil *workers did not run the call")
	}
}

// TestWorkersIdleExit: workers that time out while calls come in leave
// none of them waiting: every call runs, and idle workers exit.
func TestWorkersIdleExit(t *testing.T) {
	w := newWorkers()
	w.idleFor = time.Millisecond
	var ran atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				w.do(func() { ran.Add(1) })
				if (i+j)%7 == 0 {
					// A caller's pause, the load this test is about: idle
					// workers time out while other calls claim them.
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("ran %d calls of %d in 30 s: a call waits for a worker that left", ran.Load(), 8*200)
	}
	if n := ran.Load(); n != 8*200 {
		t.Fatalf("ran %d calls, want %d", n, 8*200)
	}
	idle := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.idle
	}
	for deadline := time.Now().Add(10 * time.Second); idle() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers still idle 10 s after the last call (idle for %v), want all gone", idle(), w.idleFor)
		}
	}
}
