package blocks

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
)

// fetchFailed counts the fetch_failed events the recorder holds.
func (e *env) fetchFailed() int {
	n := 0
	for _, ev := range e.rec.all() {
		if ev.Kind == KindFetchFailed {
			n++
		}
	}
	return n
}

// heldFailure returns a Reader that makes one attempt per fetch, and a
// member whose first request waits for hold to be closed and then fails
// with errServer; every later request is served.
func (e *env) heldFailure() (*Reader, *Member, chan struct{}) {
	r := e.reader(Config{MemBytes: 8 << 20, ReadaheadMax: -1, Attempts: 1})
	m := e.member(BlockSize)
	hold := make(chan struct{})
	e.store.Faults = func(q request, seen int) fault {
		if seen == 0 {
			return fault{Err: errServer, Wait: hold}
		}
		return fault{}
	}
	return r, m, hold
}

// A block whose flight failed for a reason that may pass (here every
// request answers 5xx until the read timeout) fails at once for a read
// that comes right after, as the kernel's retry of the page does: no
// second round of requests, no second event, the same cause.
func TestRetryableFailureFailsAtOnce(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 8 << 20, ReadaheadMax: -1, ReadTimeout: 300 * time.Millisecond, Backoff: 10 * time.Millisecond})
	m := e.member(BlockSize)
	e.store.Faults = func(request, int) fault { return fault{Err: errServer} }
	p := make([]byte, 4096)
	if _, err := r.ReadAt(context.Background(), m, p, 0); !errors.Is(err, ErrReadTimeout) || !errors.Is(err, errServer) {
		t.Fatalf("first read: %v; want ErrReadTimeout wrapping the 5xx", err)
	}
	requests, events := len(e.store.requests()), e.fetchFailed()
	if requests == 0 || events != 1 {
		t.Fatalf("first read: %d requests, %d fetch_failed events", requests, events)
	}
	_, err := r.ReadAt(context.Background(), m, p, 4096)
	if !errors.Is(err, ErrReadTimeout) || !errors.Is(err, errServer) {
		t.Fatalf("second read: %v; want the first one's failure", err)
	}
	if q, ev := len(e.store.requests()), e.fetchFailed(); q != requests || ev != events {
		t.Fatalf("second read: %d requests and %d events after %d and %d; want none more", q, ev, requests, events)
	}
}

// Past the window the block is tried afresh: once the store answers, the
// read gets the pinned bytes.
func TestRetryableFailureWindowEnds(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 8 << 20, ReadaheadMax: -1, ReadTimeout: 300 * time.Millisecond, Backoff: 10 * time.Millisecond})
	var skew atomic.Int64 // the failure memo's clock runs this far ahead
	r.fails.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	m := e.member(BlockSize)
	var down atomic.Bool
	down.Store(true)
	e.store.Faults = func(request, int) fault {
		if down.Load() {
			return fault{Err: errServer}
		}
		return fault{}
	}
	p := make([]byte, BlockSize)
	if _, err := r.ReadAt(context.Background(), m, p, 0); !errors.Is(err, errServer) {
		t.Fatalf("read while the store fails: %v", err)
	}
	down.Store(false)
	requests := len(e.store.requests())
	if _, err := r.ReadAt(context.Background(), m, p, 0); !errors.Is(err, errServer) || len(e.store.requests()) != requests {
		t.Fatalf("read within the window: %v after %d requests (%d before)", err, len(e.store.requests()), requests)
	}
	skew.Store(int64(failWindow + time.Second))
	if _, err := r.ReadAt(context.Background(), m, p, 0); err != nil || !bytes.Equal(p, e.data[m.Digest]) {
		t.Fatalf("read after the window: %v", err)
	}
	if len(e.store.requests()) == requests {
		t.Fatal("the read after the window sent no request")
	}
}

// A failure that is final (the version is gone) is not remembered: every
// read asks the store and reports it, as before.
func TestFinalFailureNotRemembered(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 8 << 20, ReadaheadMax: -1})
	m := e.member(BlockSize)
	e.store.Faults = func(request, int) fault { return fault{Err: store.ErrNotFound} }
	for k := 1; k <= 2; k++ {
		if _, err := r.ReadAt(context.Background(), m, make([]byte, 10), 0); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("read %d: %v", k, err)
		}
		if q := len(e.store.requests()); q != k {
			t.Fatalf("read %d: %d requests; want %d", k, q, k)
		}
	}
	if st := r.Stats(); st.VersionMissing != 2 {
		t.Fatalf("stats %+v; want 2 version_missing events", st)
	}
}

// A read that was interrupted got no failure, so none is remembered: the
// flight it started fails after it left, and the next read asks the store.
func TestInterruptedReadRemembersNothing(t *testing.T) {
	e := newEnv(t)
	r, m, hold := e.heldFailure()
	ctx, cancel := context.WithCancel(context.Background())
	interrupted := make(chan error, 1)
	go func() {
		_, err := r.ReadAt(ctx, m, make([]byte, 10), 0)
		interrupted <- err
	}()
	waitFor(t, func() bool { return len(e.store.requests()) == 1 })
	cancel()
	if err := <-interrupted; !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted read: %v", err)
	}
	close(hold)
	waitFor(t, func() bool { return e.fetchFailed() == 1 })
	p := make([]byte, BlockSize)
	if _, err := r.ReadAt(context.Background(), m, p, 0); err != nil || !bytes.Equal(p, e.data[m.Digest]) {
		t.Fatalf("read after an interrupted one: %v", err)
	}
}

// A read that joined a flight started before it, which then fails for a
// reason that may pass, gets a fresh flight that ends by the read's own
// deadline, not a read timeout after the first flight failed: no read
// waits longer than the read timeout. The first flight fails when the test
// says so, well within the joining read's time: had it failed at its own
// deadline, the joining read (started a moment later) would have had only
// that moment left, and on a loaded machine rightly none for a fresh
// flight.
func TestFreshFlightEndsByTheReadsDeadline(t *testing.T) {
	e := newEnv(t)
	const readTimeout = time.Second
	r := e.reader(Config{MemBytes: 8 << 20, ReadaheadMax: -1, ReadTimeout: readTimeout, Backoff: 10 * time.Millisecond, Attempts: 1})
	m := e.member(BlockSize)
	hold := make(chan struct{})
	e.store.Faults = func(q request, seen int) fault {
		if seen == 0 {
			return fault{Err: errServer, Wait: hold}
		}
		return fault{Hang: true}
	}
	first := make(chan error, 1)
	go func() {
		_, err := r.ReadAt(context.Background(), m, make([]byte, 10), 0)
		first <- err
	}()
	waitFor(t, func() bool { return len(e.store.requests()) == 1 })
	joined := make(chan error, 1)
	go func() {
		_, err := r.ReadAt(context.Background(), m, make([]byte, 10), 0)
		joined <- err
	}()
	waitFor(t, func() bool { return r.Stats().Joined == 1 })
	joinedBy := time.Now() // the joining read started before this
	// The first flight fails this long after the joining read started, so
	// a fresh flight timed from that failure would end past its deadline.
	time.Sleep(50 * time.Millisecond)
	close(hold)
	if err := <-first; !errors.Is(err, errServer) {
		t.Fatalf("the read that started the flight: %v; want its failure", err)
	}
	if err := <-joined; !errors.Is(err, ErrReadTimeout) {
		t.Fatalf("the read that joined: %v", err)
	}
	ends := e.store.deadlines()
	if st := r.Stats(); st.FreshFlights != 1 || len(ends) != 2 {
		t.Fatalf("stats %+v, %d requests; want 1 fresh flight, 2 requests", st, len(ends))
	}
	if fresh := ends[1]; fresh.IsZero() || fresh.After(joinedBy.Add(readTimeout)) {
		t.Fatalf("the fresh flight's deadline is %v after the joining read started; want at most the read timeout %v",
			fresh.Sub(joinedBy), readTimeout)
	}
}
