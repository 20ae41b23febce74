package blocks

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pinfs/pinfs/store/cache"
)

// failWindow is how long a block whose read failed for a reason that may
// pass (a timeout, throttling, a 5xx) fails at once for the reads that
// come after; past it the block is tried afresh. The kernel reads a page
// once more after its readahead failed: without the window that retry
// would wait a whole read timeout again. A read that fails at once does
// not start the window again.
const failWindow = 5 * time.Second

// maxFailures bounds the failures remembered; past it, expired ones are
// dropped, and if none has expired a new failure is not remembered (its
// block is then tried again, as every block was before the window).
const maxFailures = 4096

// failures remembers, per block, the last failure that may pass which a
// read returned, for failWindow. Its methods are safe for
// concurrent use; n lets a read skip the lock when nothing failed.
type failures struct {
	n   atomic.Int64 // len(m)
	mu  sync.Mutex
	m   map[cache.Key]failure
	now func() time.Time // time.Now; tests move it on
}

// failure is one block's remembered failure.
type failure struct {
	at  time.Time
	err error
}

func newFailures() *failures {
	return &failures{m: make(map[cache.Key]failure), now: time.Now}
}

// add remembers that a read of block k failed with err, now.
func (f *failures) add(k cache.Key, err error) {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.m) >= maxFailures {
		for j, e := range f.m {
			if now.Sub(e.at) >= failWindow {
				delete(f.m, j)
			}
		}
		if _, ok := f.m[k]; !ok && len(f.m) >= maxFailures {
			return
		}
	}
	f.m[k] = failure{at: now, err: err}
	f.n.Store(int64(len(f.m)))
}

// forget drops block k's failure, once the block has loaded.
func (f *failures) forget(k cache.Key) {
	if f.n.Load() == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, k)
	f.n.Store(int64(len(f.m)))
}

// recent returns an error wrapping block k's failure if it is less than
// failWindow old, and nil otherwise.
func (f *failures) recent(k cache.Key) error {
	if f.n.Load() == 0 {
		return nil
	}
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.m[k]
	if !ok {
		return nil
	}
	if age := now.Sub(e.at); age < failWindow {
		return fmt.Errorf("%w (failed %v ago; block %d is tried again %v after a failure)",
			e.err, age.Round(time.Millisecond), k.Index, failWindow)
	}
	delete(f.m, k)
	f.n.Store(int64(len(f.m)))
	return nil
}
