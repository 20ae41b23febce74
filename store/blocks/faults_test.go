package blocks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/storetest"
	"github.com/pinfs/pinfs/verify/b3"
)

var errSlowDown = fmt.Errorf("503 SlowDown: %w", store.ErrThrottled)

// A store that throttles every request: the read fails within the read
// timeout, as EIO would (not a context error, which would be EINTR), with
// a fetch_failed event that says why, and few requests.
func TestThrottledForever(t *testing.T) {
	e := newEnv(t)
	const readTimeout = time.Second
	r := e.reader(Config{MemBytes: 8 << 20, ReadTimeout: readTimeout, Backoff: 10 * time.Millisecond})
	m := e.member(5 * BlockSize)
	e.store.Faults = func(request, int) fault { return fault{Err: errSlowDown} }
	start := time.Now()
	n, err := r.ReadAt(context.Background(), m, make([]byte, 128<<10), 0)
	took := time.Since(start)
	t.Logf("throttled forever: read failed after %v and %d requests: %v", took, len(e.store.requests()), err)
	if n != 0 || !errors.Is(err, ErrReadTimeout) || !errors.Is(err, store.ErrThrottled) {
		t.Fatalf("ReadAt = %d, %v; want ErrReadTimeout wrapping store.ErrThrottled", n, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Fatalf("ReadAt: %v reads as an interrupt (EINTR)", err)
	}
	if took > readTimeout+10*time.Second {
		t.Fatalf("read failed after %v, read timeout %v", took, readTimeout)
	}
	if q := len(e.store.requests()); q > 30 {
		t.Fatalf("%d requests in %v", q, took)
	}
	var block0 bool
	for _, ev := range e.rec.all() {
		block0 = block0 || ev.Kind == KindFetchFailed && ev.Off == 0 && errors.Is(ev.Err, ErrReadTimeout)
	}
	if !block0 {
		t.Fatalf("events %+v; want fetch_failed of block 0", e.rec.all())
	}
	if st := r.Stats(); st.FetchFailed == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A burst of throttling is waited out (it does not count against
// Attempts) and the bytes are right.
func TestThrottledBurst(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 8 << 20, Attempts: 2, ReadTimeout: 20 * time.Second, Backoff: 10 * time.Millisecond})
	m := e.member(3*BlockSize + 7)
	e.store.Faults = func(q request, seen int) fault {
		if seen < 6 {
			return fault{Err: errSlowDown}
		}
		return fault{}
	}
	e.readAll(r, m, BlockSize)
	if ev := e.rec.all(); len(ev) != 0 {
		t.Fatalf("events %+v", ev)
	}
}

// When the store throttles, all fetches slow down together: the limiter
// spaces the requests of every fetch, and recovers once answers are good.
func TestLimiterShared(t *testing.T) {
	l := newLimiter(20*time.Millisecond, time.Second)
	if err := l.wait(context.Background()); err != nil || l.limited() != 0 {
		t.Fatalf("unthrottled limiter: %v, gap %v", err, l.limited())
	}
	l.throttled()
	l.throttled() // the same burst: the rate is halved once
	if g := l.limited(); g != 20*time.Millisecond {
		t.Fatalf("gap %v after one burst, want 20ms", g)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() { l.wait(context.Background()) })
	}
	wg.Wait()
	// A jittered hold-off of at least half a gap, then 5 starts a gap apart.
	if d := time.Since(start); d < 4*20*time.Millisecond {
		t.Fatalf("5 requests after a throttled answer started within %v", d)
	}
	// A slot past the deadline is refused at once. Throttled answers
	// once each gap has passed halve the rate again, up to a gap of
	// 160ms; the next slot is then further off than the deadline.
	waitFor(t, func() bool {
		l.throttled()
		return l.limited() >= 160*time.Millisecond
	})
	l.wait(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if err := l.wait(ctx); !errors.Is(err, errNoSlot) {
		t.Fatalf("wait past the deadline: %v, want errNoSlot", err)
	}
	for range 100 {
		l.ok()
	}
	if g := l.limited(); g != 0 {
		t.Fatalf("gap %v after 100 good answers, want none", g)
	}
}

// A reader that joined a flight another read started, which then fails
// with a transient error, gets a fresh attempt of its own; the read that
// started the flight gets the failure.
func TestJoinerGetsFreshAttempt(t *testing.T) {
	e := newEnv(t)
	r, m, hold := e.heldFailure()
	first := make(chan error, 1)
	go func() {
		_, err := r.ReadAt(context.Background(), m, make([]byte, 10), 0)
		first <- err
	}()
	waitFor(t, func() bool { return len(e.store.requests()) == 1 })
	sent := time.Now()
	waitFor(t, func() bool { return time.Now().After(sent) }) // a later read: a later deadline
	joined := make(chan error, 1)
	p := make([]byte, BlockSize)
	go func() {
		_, err := r.ReadAt(context.Background(), m, p, 0)
		joined <- err
	}()
	waitFor(t, func() bool { return r.Stats().Joined == 1 })
	close(hold)
	if err := <-first; !errors.Is(err, errServer) {
		t.Fatalf("the read that started the flight: %v, want its failure", err)
	}
	if err := <-joined; err != nil || !bytes.Equal(p, e.data[m.Digest]) {
		t.Fatalf("the read that joined: %v", err)
	}
	if st := r.Stats(); st.FreshFlights != 1 || st.Requests != 2 {
		t.Fatalf("stats %+v; want 1 fresh flight, 2 requests", st)
	}
}

// Close while reads run (a lazily detached mount at shutdown): no panic
// and no race in the memory tier, the reads end with an error or their
// bytes, Close returns, and later reads fail with ErrClosed.
func TestCloseDuringReads(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 8 << 20, StallTimeout: time.Hour})
	ms := []*Member{e.member(2 * BlockSize), e.member(3000), e.member(BlockSize + 5)}
	stalled := e.member(BlockSize)
	e.store.Faults = func(q request, seen int) fault { return fault{Stall: q.Obj == stalled.Object} }
	for _, m := range ms {
		e.readAll(r, m, BlockSize) // memory hits from now on
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	for g := range 4 {
		wg.Go(func() {
			p := make([]byte, 4096)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				m := ms[(g+i)%len(ms)]
				n, err := r.ReadAt(context.Background(), m, p, int64(i*4096)%m.Size)
				reads.Add(1)
				if err != nil && !errors.Is(err, ErrClosed) && err != io.EOF {
					t.Errorf("read during Close: %d, %v", n, err)
					return
				}
			}
		})
	}
	stalledErr := make(chan error, 1)
	go func() {
		_, err := r.ReadAt(context.Background(), stalled, make([]byte, 10), 0)
		stalledErr <- err
	}()
	waitFor(t, func() bool { return reads.Load() > 100 && len(e.store.requests()) > 3 })
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return")
	}
	if err := <-stalledErr; !errors.Is(err, ErrClosed) {
		t.Errorf("read of a stalled block: %v, want ErrClosed", err)
	}
	close(stop)
	wg.Wait()
	if _, err := r.ReadAt(context.Background(), ms[0], make([]byte, 1), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("ReadAt after Close: %v", err)
	}
}

var errDiskFull = errors.New("run record and spool: no space left on device")

// An event that cannot be recorded fails the read that caused it, healed
// blocks included, and is counted.
func TestEventNotRecorded(t *testing.T) {
	t.Run("fetch_failed", func(t *testing.T) {
		e := newEnv(t)
		e.rec.failWith(errDiskFull)
		r := e.reader(Config{MemBytes: 8 << 20, Attempts: 2})
		m := e.member(100)
		e.store.Faults = func(request, int) fault { return fault{Err: errServer} }
		_, err := r.ReadAt(context.Background(), m, make([]byte, 10), 0)
		if !errors.Is(err, ErrNotRecorded) || !errors.Is(err, errServer) {
			t.Fatalf("ReadAt: %v; want ErrNotRecorded and the cause", err)
		}
		if st := r.Stats(); st.EventsUnrecorded != 1 || st.FetchFailed != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("network mismatch healed", func(t *testing.T) {
		e := newEnv(t)
		e.rec.failWith(errDiskFull)
		r := e.reader(Config{MemBytes: 8 << 20, ReadaheadMax: -1})
		m := e.member(3*BlockSize + 5)
		e.store.Faults = corruptAt(m.Object, BlockSize, 1)
		p := make([]byte, BlockSize)
		n, err := r.ReadAt(context.Background(), m, p, BlockSize)
		if !errors.Is(err, ErrNotRecorded) || n != 0 {
			t.Fatalf("ReadAt = %d, %v; want ErrNotRecorded", n, err)
		}
		if st := r.Stats(); st.EventsUnrecorded != 1 {
			t.Fatalf("stats %+v", st)
		}
		// Once events can be recorded again, the event is, and the block
		// reads.
		e.rec.failWith(nil)
		readAt(t, r, m, e.data[m.Digest], BlockSize, BlockSize)
		if evs := e.rec.all(); len(evs) != 1 || evs[0].Kind != KindMismatch || evs[0].Off != BlockSize {
			t.Fatalf("events %+v; want the mismatch of block 1, once", evs)
		}
	})
	t.Run("span mismatch healed", func(t *testing.T) {
		e := newEnv(t)
		e.rec.failWith(errDiskFull)
		r := e.reader(Config{MemBytes: 64 << 20, ReadaheadMax: 8 * BlockSize, SpanBlocks: 4})
		m := e.member(8 * BlockSize)
		e.store.Faults = func(q request, seen int) fault {
			return fault{Corrupt: q.N > BlockSize && seen == 0}
		}
		// Readahead fetches blocks 1-3 in one span, which arrives with block
		// 2 damaged; the refetch heals it and its event is not recorded.
		// Whether the read of block 2 joins that flight or comes after it
		// has ended, it fails.
		var failed error
		off := int64(0)
		p := make([]byte, 128<<10)
		for ; off < m.Size; off += int64(len(p)) {
			if _, failed = r.ReadAt(context.Background(), m, p, off); failed != nil {
				break
			}
		}
		if !errors.Is(failed, ErrNotRecorded) || off != 2*BlockSize {
			t.Fatalf("sequential read with a damaged span copy: at %d: %v; want ErrNotRecorded at block 2", off, failed)
		}
		// Once events can be recorded, the member reads, and the run record
		// has each healed block's mismatch once: block 2's, and block 6's of
		// the span 4-7 read ahead by the read that failed, whether that
		// event was recorded by its flight or owed to its read.
		e.rec.failWith(nil)
		e.readAll(r, m, 128<<10)
		r.Close()
		got := map[int64]int{}
		for _, ev := range e.rec.all() {
			if ev.Kind != KindMismatch || ev.From != FromNetwork {
				t.Fatalf("event %+v; want network mismatches only", ev)
			}
			got[ev.Off/BlockSize]++
		}
		if len(got) != 2 || got[2] != 1 || got[6] != 1 {
			t.Fatalf("mismatch events per block %v; want blocks 2 and 6, once each", got)
		}
	})
	t.Run("span mismatch healed before the read came", func(t *testing.T) {
		// The interleaving that made "span mismatch healed" flaky on a
		// loaded machine, forced: the readahead flight that took the
		// damaged span has healed the block, failed to record the event and
		// ended before any read of the block arrives. The event is owed to
		// the block's next read, which fails; once events can be recorded
		// again it is recorded, once, and the block reads.
		e := newEnv(t)
		e.rec.failWith(errDiskFull)
		r := e.reader(Config{MemBytes: 64 << 20, ReadaheadMax: 8 * BlockSize, SpanBlocks: 4})
		m := e.member(8 * BlockSize)
		var bad int64
		e.store.Faults = firstSpanCorrupt(m.Object, 0, &bad)
		readAt(t, r, m, e.data[m.Digest], 0, 128<<10) // reads ahead blocks 1-3 in one span
		waitFor(t, func() bool { return r.Stats().EventsUnrecorded == 1 && r.calls.Len() == 0 })
		if bad != 2*BlockSize {
			t.Fatalf("damaged block at %d, want block 2", bad)
		}
		p := make([]byte, 128<<10)
		if n, err := r.ReadAt(context.Background(), m, p, bad); !errors.Is(err, ErrNotRecorded) || n != 0 {
			t.Fatalf("read of the healed block after its flight ended = %d, %v; want ErrNotRecorded", n, err)
		}
		if n, err := r.ReadAt(context.Background(), m, p, bad); !errors.Is(err, ErrNotRecorded) || n != 0 {
			t.Fatalf("read of the block again while events cannot be recorded = %d, %v; want ErrNotRecorded", n, err)
		}
		e.rec.failWith(nil)
		readAt(t, r, m, e.data[m.Digest], bad, 128<<10)
		evs := e.rec.all()
		if len(evs) != 1 || evs[0].Kind != KindMismatch || evs[0].From != FromNetwork || evs[0].Off != bad {
			t.Fatalf("events %+v; want the owed network mismatch of block 2, once", evs)
		}
	})
	t.Run("disk mismatch healed", func(t *testing.T) {
		e := newEnv(t)
		dir := t.TempDir()
		m := e.member(2 * BlockSize)
		r0 := e.reader(Config{Disk: diskDir(t, dir, 64<<20)})
		e.readAll(r0, m, BlockSize)
		r0.Close()
		damageDiskBlock(t, dir, m, 1)
		e.rec.failWith(errDiskFull)
		r := e.reader(Config{MemBytes: 8 << 20, Disk: diskDir(t, dir, 64<<20), ReadaheadMax: -1})
		_, err := r.ReadAt(context.Background(), m, make([]byte, 10), BlockSize)
		if !errors.Is(err, ErrNotRecorded) {
			t.Fatalf("ReadAt: %v; want ErrNotRecorded of a disk mismatch", err)
		}
	})
}

// Reads of a block whose event is owed wait for the one attempt to record
// it: none is served before the event is durable, and it is recorded once.
func TestOwedEventRecordedOnce(t *testing.T) {
	e := newEnv(t)
	e.rec.failWith(errDiskFull)
	r := e.reader(Config{MemBytes: 8 << 20, ReadaheadMax: -1})
	m := e.member(2 * BlockSize)
	e.store.Faults = corruptAt(m.Object, BlockSize, 1)
	if _, err := r.ReadAt(context.Background(), m, make([]byte, 10), BlockSize); !errors.Is(err, ErrNotRecorded) {
		t.Fatalf("ReadAt: %v; want ErrNotRecorded", err)
	}
	e.rec.failWith(nil)
	release := make(chan struct{})
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock)
	var reporting atomic.Int32
	e.rec.OnReport = func(Event) {
		reporting.Add(1)
		<-release
	}
	var served, early atomic.Int32
	var released atomic.Bool
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() {
			p := make([]byte, 10)
			_, err := r.ReadAt(context.Background(), m, p, BlockSize)
			if err == nil && !bytes.Equal(p, e.data[m.Digest][BlockSize:BlockSize+10]) {
				err = errors.New("wrong bytes")
			}
			if !released.Load() {
				early.Add(1)
			}
			served.Add(1)
			errs <- err
		}()
	}
	waitFor(t, func() bool { return reporting.Load() == 1 })
	// Every read is in settle: one recording the event, three waiting
	// for it (or one returned already, which the check below catches).
	waitFor(t, func() bool { return storetest.Parked("blocks.(*Reader).settle") == cap(errs) || served.Load() > 0 })
	if n := served.Load(); n != 0 {
		t.Fatalf("%d reads returned while their block's event was being recorded", n)
	}
	released.Store(true)
	unblock()
	for range cap(errs) {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatalf("ReadAt once the event could be recorded: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("reads still waiting 30 s after the event was recorded")
		}
	}
	if n := early.Load(); n != 0 {
		t.Fatalf("%d reads returned while their block's event was being recorded", n)
	}
	if evs := e.rec.all(); len(evs) != 1 || evs[0].Kind != KindMismatch || evs[0].Off != BlockSize {
		t.Fatalf("events %+v; want the owed mismatch, once", evs)
	}
	if st := r.Stats(); st.EventsUnrecorded != 1 {
		t.Fatalf("stats %+v; want 1 event unrecorded", st)
	}
}

// damageDiskBlock flips a byte of block i of m in the disk tier in dir.
func damageDiskBlock(t *testing.T, dir string, m *Member, i int64) {
	t.Helper()
	h := m.Digest.Hex()
	path := filepath.Join(dir, h[:2], h)
	if _, err := os.Stat(path); err != nil {
		path += ".part"
	}
	os.Chmod(path, 0o600) // a whole-member file is 0400
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off := i*BlockSize + min(BlockSize, m.Size-i*BlockSize)/2
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// firstSpanCorrupt returns faults that damage the first span response (a
// request of more than one block) and, if refetches is > 0, the first
// refetches requests of the damaged block alone; refetches < 0 damages
// every later request that covers the block, span or not. *bad is set to
// the offset of the damaged block. The fake store calls it under its lock.
func firstSpanCorrupt(obj store.Object, refetches int, bad *int64) func(request, int) fault {
	spans, alone := 0, 0
	*bad = -1
	return func(q request, seen int) fault {
		switch {
		case q.Obj != obj:
		case refetches < 0 && *bad >= 0 && q.Off <= *bad && *bad < q.Off+q.N:
			return fault{Corrupt: true}
		case q.N > BlockSize:
			spans++
			if spans == 1 {
				*bad = (q.Off + q.N/2) / BlockSize * BlockSize
				return fault{Corrupt: true}
			}
		case q.Off == *bad && alone < refetches:
			alone++
			return fault{Corrupt: true}
		}
		return fault{}
	}
}

// A block that arrives damaged in a span request is fetched again alone,
// and reported once, after the refetch: as healed when it verifies.
func TestSpanCorruptionOnceHealed(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 64 << 20, ReadaheadMax: 8 * BlockSize, SpanBlocks: 4})
	m := e.member(8*BlockSize + 3)
	var bad int64
	e.store.Faults = firstSpanCorrupt(m.Object, 0, &bad)
	var atReport []int // requests of the damaged block when each event was reported
	e.rec.OnReport = func(ev Event) { atReport = append(atReport, e.store.perBlock()[request{Obj: m.Object, Off: ev.Off}]) }
	e.readAll(r, m, 128<<10)
	r.Close()
	ev := e.rec.all()
	if bad < 0 || len(ev) != 1 || ev[0].Kind != KindMismatch || ev[0].From != FromNetwork || ev[0].Off != bad ||
		!errors.Is(ev[0].Err, b3.ErrMismatch) || !strings.Contains(ev[0].Err.Error(), "healed") {
		t.Fatalf("events %+v; want one mismatch from the network of block %d, saying healed", ev, bad)
	}
	if atReport[0] < 2 {
		t.Fatalf("the mismatch was reported after %d requests of the block, before its refetch", atReport[0])
	}
	if st := r.Stats(); st.Mismatches != 1 {
		t.Fatalf("stats %+v, want 1 mismatch", st)
	}
}

// A block damaged in a span request and again when fetched alone fails
// the read with a mismatch event per failed load, none marked healed.
//
// The block stays damaged for every later request too: a read that comes
// after the failed load (readahead loaded it first) starts a load of its
// own, as no failure is remembered, and must not find a good copy.
func TestSpanCorruptionTwiceFails(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 64 << 20, ReadaheadMax: 8 * BlockSize, SpanBlocks: 4})
	m := e.member(8 * BlockSize)
	var bad int64
	e.store.Faults = firstSpanCorrupt(m.Object, -1, &bad)
	var failed error
	p := make([]byte, 128<<10)
	for off := int64(0); off < m.Size && failed == nil; off += int64(len(p)) {
		_, failed = r.ReadAt(context.Background(), m, p, off)
	}
	if !errors.Is(failed, b3.ErrMismatch) {
		t.Fatalf("sequential read with a block damaged twice: %v; want b3.ErrMismatch", failed)
	}
	r.Close()
	ev := e.rec.all()
	if len(ev) == 0 || len(ev) > 2 {
		t.Fatalf("%d events %+v; want one mismatch per failed load of block %d (readahead's, the read's)", len(ev), ev, bad)
	}
	for _, ev := range ev {
		if ev.Kind != KindMismatch || ev.Off != bad || strings.Contains(ev.Err.Error(), "healed") || !errors.Is(ev.Err, b3.ErrMismatch) {
			t.Fatalf("event %+v; want a mismatch of block %d, not healed", ev, bad)
		}
	}
}

// errRefused is what a dial to a gateway that is down gives.
var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// refusedFor returns a function that gives errRefused until d has passed
// (forever if d < 0), then nil.
func refusedFor(d time.Duration) func() error {
	up := time.Now().Add(d)
	return func() error {
		if d < 0 || time.Now().Before(up) {
			return errRefused
		}
		return nil
	}
}

// A store that refuses connections for a while, shorter than the read
// timeout, is waited out: the read gets its bytes and no event, whether
// the outboard must be loaded through the outage too or only the blocks.
func TestOutageWaitedOut(t *testing.T) {
	const outage = 2 * time.Second
	for _, obDown := range []bool{true, false} {
		t.Run(fmt.Sprintf("outboard down %v", obDown), func(t *testing.T) {
			e := newEnv(t)
			// The default backoff: 100 ms, doubling.
			r := e.reader(Config{MemBytes: 8 << 20, ReadTimeout: 20 * time.Second, Backoff: 100 * time.Millisecond})
			m := e.member(3*BlockSize + 5)
			down := refusedFor(outage)
			e.store.Faults = func(request, int) fault { return fault{Err: down()} }
			if obDown {
				e.obs.Fail = down
			}
			start := time.Now()
			e.readAll(r, m, BlockSize)
			t.Logf("read across a %v outage in %v, %d requests", outage, time.Since(start).Round(time.Millisecond), len(e.store.requests()))
			if ev := e.rec.all(); len(ev) != 0 {
				t.Fatalf("events %+v", ev)
			}
		})
	}
}

// A store that refuses connections for good fails the read within the
// read timeout (plus a margin) with ErrReadTimeout, never an interrupt,
// and a fetch_failed event, without spinning.
func TestStoreDownForever(t *testing.T) {
	const readTimeout = 2 * time.Second
	for _, size := range []int64{3*BlockSize + 5, 1000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			e := newEnv(t)
			r := e.reader(Config{MemBytes: 8 << 20, ReadTimeout: readTimeout, Backoff: 100 * time.Millisecond})
			m := e.member(size)
			down := refusedFor(-1)
			e.store.Faults = func(request, int) fault { return fault{Err: down()} }
			e.obs.Fail = down
			start := time.Now()
			n, err := r.ReadAt(context.Background(), m, make([]byte, 100), 0)
			took := time.Since(start)
			t.Logf("store down: read failed after %v, %d requests: %v", took, len(e.store.requests()), err)
			if n != 0 || !errors.Is(err, ErrReadTimeout) || !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("ReadAt = %d, %v; want ErrReadTimeout wrapping the refusal", n, err)
			}
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				t.Fatalf("ReadAt: %v reads as an interrupt (EINTR)", err)
			}
			if took > readTimeout+10*time.Second {
				t.Fatalf("read failed after %v, read timeout %v", took, readTimeout)
			}
			if q := len(e.store.requests()); q > 40 {
				t.Fatalf("%d requests in %v", q, took)
			}
			// Readahead may fail the next block too, with an event of its own.
			var block0 bool
			for _, ev := range e.rec.all() {
				if ev.Kind != KindFetchFailed || !errors.Is(ev.Err, ErrReadTimeout) {
					t.Fatalf("event %+v; want fetch_failed events that say read timeout", ev)
				}
				block0 = block0 || ev.Off == 0
			}
			if !block0 {
				t.Fatalf("events %+v; want a fetch_failed of block 0", e.rec.all())
			}
		})
	}
}

// A store that cuts every body after a few bytes does not make a fetch
// spin: the requests back off, and the read fails at the read timeout.
func TestCutBodiesDoNotSpin(t *testing.T) {
	const readTimeout = time.Second
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 8 << 20, ReadaheadMax: -1, ReadTimeout: readTimeout, Backoff: 10 * time.Millisecond})
	m := e.member(BlockSize)
	e.store.Faults = func(request, int) fault { return fault{Short: true, Cut: 10} }
	start := time.Now()
	_, err := r.ReadAt(context.Background(), m, make([]byte, 100), 0)
	took := time.Since(start)
	t.Logf("cut bodies: read failed after %v, %d requests: %v", took, len(e.store.requests()), err)
	if !errors.Is(err, ErrReadTimeout) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("ReadAt: %v; want ErrReadTimeout wrapping the cut", err)
	}
	if q := len(e.store.requests()); q > 60 {
		t.Fatalf("%d requests in %v", q, took)
	}
}
