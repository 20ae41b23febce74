package blocks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/b3"
)

// The tests in this file check that a cold read of a member of more than
// one block loads its outboard together with its first block request, and
// that verification still waits for both.

// gateBound bounds how long a gated outboard load waits for the store to
// see what the test waits for; on code that requests blocks only after the
// outboard has loaded, the gate would otherwise wait forever.
const gateBound = 3 * time.Second

// trace records, in order, what the store and the outboards saw, and
// signals the first block request and the first response body closed
// (the request has read it: every progress callback has run).
type trace struct {
	mu        sync.Mutex
	steps     []string
	req       chan struct{}
	closed    chan struct{}
	reqOnce   sync.Once
	closeOnce sync.Once
}

func newTrace() *trace { return &trace{req: make(chan struct{}), closed: make(chan struct{})} }

func (tr *trace) add(step string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.steps = append(tr.steps, step)
}

func (tr *trace) all() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.steps)
}

// index returns the position of the first step that begins with prefix,
// or -1.
func (tr *trace) index(prefix string) int {
	return slices.IndexFunc(tr.all(), func(s string) bool { return strings.HasPrefix(s, prefix) })
}

// count returns the number of steps that begin with prefix.
func (tr *trace) count(prefix string) int {
	n := 0
	for _, s := range tr.all() {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// tracedStore is a fakeStore whose requests and body closes go to a trace.
type tracedStore struct {
	*fakeStore
	tr *trace
}

func (s tracedStore) ReadRange(ctx context.Context, obj store.Object, off, n int64) (io.ReadCloser, error) {
	s.tr.add(fmt.Sprintf("request %d+%d", off, n))
	s.tr.reqOnce.Do(func() { close(s.tr.req) })
	rc, err := s.fakeStore.ReadRange(ctx, obj, off, n)
	if err != nil {
		return nil, err
	}
	return &tracedBody{ReadCloser: rc, tr: s.tr}, nil
}

type tracedBody struct {
	io.ReadCloser
	tr   *trace
	once sync.Once
}

func (b *tracedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() {
		b.tr.add("body closed")
		b.tr.closeOnce.Do(func() { close(b.tr.closed) })
	})
	return err
}

// gatedOutboards is a fakeOutboards whose loads go to a trace and answer
// only once gate (if set) returns; an error from gate fails the load.
type gatedOutboards struct {
	*fakeOutboards
	tr   *trace
	gate func(ctx context.Context) error
}

func (o gatedOutboards) Outboard(ctx context.Context, d b3.Sum, size int64, fresh bool) ([]byte, error) {
	o.tr.add(fmt.Sprintf("outboard load (fresh %v)", fresh))
	if o.gate != nil {
		if err := o.gate(ctx); err != nil {
			o.tr.add("outboard failed")
			return nil, err
		}
	}
	ob, err := o.fakeOutboards.Outboard(ctx, d, size, fresh)
	o.tr.add("outboard answered")
	return ob, err
}

// errGate is what a gated outboard load that waited in vain fails with: a
// permanent answer, so that the read fails at once and says why.
var errGate = fmt.Errorf("the outboard load waited %v and the store saw no block request: the request waits for the outboard (two round trips to the first byte): %w", gateBound, store.ErrAccessDenied)

// until returns a gate that opens when ch is closed, or fails with errGate
// after gateBound, or with ctx's error.
func until(ch <-chan struct{}) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-ch:
			return nil
		case <-time.After(gateBound):
			return errGate
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// gatedReader returns a Reader over e with cfg's tuning whose store and
// outboards report to a new trace, the outboards answering through gate.
func gatedReader(t *testing.T, e *env, cfg Config, gate func(r *Reader, tr *trace) func(context.Context) error) (*Reader, *trace) {
	t.Helper()
	tr := newTrace()
	ob := &gatedOutboards{fakeOutboards: e.obs, tr: tr}
	cfg.Objects, cfg.Outboards, cfg.Reporter = tracedStore{e.store, tr}, ob, e.rec
	if cfg.Backoff == 0 {
		cfg.Backoff = time.Millisecond
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if gate != nil {
		ob.gate = gate(r, tr)
	}
	return r, tr
}

// readHead reads the first 4 KiB of m and checks them.
func readHead(t *testing.T, e *env, r *Reader, m *Member, tr *trace) {
	t.Helper()
	p := make([]byte, 4096)
	n, err := r.ReadAt(context.Background(), m, p, 0)
	if err != nil || n != len(p) {
		t.Fatalf("ReadAt(%s, 0) = %d, %v; want the first block served (trace %q)", m.Path, n, err, tr.all())
	}
	if !bytes.Equal(p, e.data[m.Digest][:len(p)]) {
		t.Fatalf("%s: first 4 KiB differ from the source", m.Path)
	}
}

// A cold read of a member of several blocks sends its first block request
// while the outboard load has not answered: the outboard's gate opens only
// once the store has seen a block request. Code that loads the outboard
// first fails the read with errGate.
func TestOutboardLoadsWithFirstBlock(t *testing.T) {
	for _, c := range []struct {
		name string
		size int64
		cfg  Config
	}{
		{"one block at a time", 3*BlockSize + 5, Config{ReadaheadMax: -1}},
		{"sequential with readahead", 20 * BlockSize, Config{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			m := e.member(c.size)
			r, tr := gatedReader(t, e, c.cfg, func(_ *Reader, tr *trace) func(context.Context) error { return until(tr.req) })
			readHead(t, e, r, m, tr)
			load, req, answer := tr.index("outboard load"), tr.index("request 0+"), tr.index("outboard answered")
			if load < 0 || req < 0 || answer < req {
				t.Fatalf("trace %q: want the outboard load and block 0's request before the outboard answered", tr.all())
			}
			if plain, fresh := e.obs.ncalls(); plain != 1 || fresh != 0 {
				t.Fatalf("outboard loads: %d plain, %d fresh; want 1, 0 (trace %q)", plain, fresh, tr.all())
			}
		})
	}
}

// A block whose bytes are all in before the outboard is neither served nor
// cached until the outboard is: the gate opens once the block's response
// body has been read and closed, and looks first.
func TestBlockWaitsForOutboard(t *testing.T) {
	e := newEnv(t)
	m := e.member(2*BlockSize + 3)
	read := make(chan struct{})
	var early []string // what the gate found before it opened
	r, tr := gatedReader(t, e, Config{MemBytes: 8 << 20, ReadaheadMax: -1}, func(r *Reader, tr *trace) func(context.Context) error {
		return func(ctx context.Context) error {
			if err := until(tr.closed)(ctx); err != nil {
				return err
			}
			if st := r.Stats(); st.BlocksVerified != 0 {
				early = append(early, fmt.Sprintf("%d blocks verified", st.BlocksVerified))
			}
			if _, ok := r.memBlock(m, 0); ok {
				early = append(early, "block 0 in the memory tier")
			}
			select {
			case <-read:
				early = append(early, "the read returned")
			default:
			}
			return nil
		}
	})
	p := make([]byte, 4096)
	var err error
	go func() {
		defer close(read)
		_, err = r.ReadAt(context.Background(), m, p, 0)
	}()
	<-read
	if err != nil || !bytes.Equal(p, e.data[m.Digest][:len(p)]) {
		t.Fatalf("ReadAt: %v or bytes that differ from the source (trace %q)", err, tr.all())
	}
	if len(early) > 0 {
		t.Fatalf("before the outboard answered: %s (trace %q)", strings.Join(early, ", "), tr.all())
	}
	if closed, answer := tr.index("body closed"), tr.index("outboard answered"); closed < 0 || answer < closed {
		t.Fatalf("trace %q: want the body read and closed before the outboard answered", tr.all())
	}
	if st := r.Stats(); st.Requests != 1 || st.BlocksVerified != 1 {
		t.Fatalf("stats %+v; want one request and one block verified", st)
	}
}

// An outboard that arrives after the block's bytes and cannot be used
// fails the read as it always did: a load that fails gives a fetch_failed
// event and its error, nothing verified or cached; a damaged outboard
// (the store's copy too) gives a mismatch once the block has been checked
// against a reloaded outboard and fetched once more.
func TestLateOutboardFailure(t *testing.T) {
	denied := fmt.Errorf("outboard: %w", store.ErrAccessDenied)
	for _, c := range []struct {
		name     string
		fail     error // the gate fails the load with it
		damaged  bool  // the stored outboard is damaged
		want     error
		kind     string
		reqs     int
		obLoads  [2]int // plain, fresh: loads asked of the outboards
		verified int64
	}{
		{name: "load fails", fail: denied, want: store.ErrAccessDenied, kind: KindFetchFailed, reqs: 1, obLoads: [2]int{1, 0}},
		{name: "damaged", damaged: true, want: b3.ErrMismatch, kind: KindMismatch, reqs: 2, obLoads: [2]int{1, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			m := e.member(2*BlockSize + 3)
			if c.damaged {
				ob := bytes.Clone(e.obs.obs[m.Digest])
				ob[8] ^= 1 // the first chaining value after the size: on block 0's path
				e.obs.obs[m.Digest] = ob
			}
			r, tr := gatedReader(t, e, Config{MemBytes: 8 << 20, ReadaheadMax: -1}, func(_ *Reader, tr *trace) func(context.Context) error {
				return func(ctx context.Context) error {
					if err := until(tr.closed)(ctx); err != nil {
						return err
					}
					return c.fail
				}
			})
			n, err := r.ReadAt(context.Background(), m, make([]byte, 4096), 0)
			if n != 0 || !errors.Is(err, c.want) || errors.Is(err, errGate) {
				t.Fatalf("ReadAt = %d, %v; want an error wrapping %v (trace %q)", n, err, c.want, tr.all())
			}
			ev := e.rec.all()
			if len(ev) != 1 || ev[0].Kind != c.kind || ev[0].Off != 0 || !errors.Is(ev[0].Err, c.want) {
				t.Fatalf("events %+v; want one %s of block 0", ev, c.kind)
			}
			if c.fail != nil && !errors.Is(ev[0].Err, errOutboard) {
				t.Fatalf("event error %v; want it to say the outboard could not be loaded", ev[0].Err)
			}
			st := r.Stats()
			if st.Requests != int64(c.reqs) || st.BlocksVerified != c.verified {
				t.Fatalf("stats %+v; want %d requests, %d blocks verified", st, c.reqs, c.verified)
			}
			if _, ok := r.memBlock(m, 0); ok {
				t.Fatal("an unverified block is in the memory tier")
			}
			if plain, fresh := tr.count("outboard load (fresh false)"), tr.count("outboard load (fresh true)"); plain != c.obLoads[0] || fresh != c.obLoads[1] {
				t.Fatalf("outboard loads %d plain, %d fresh; want %v", plain, fresh, c.obLoads)
			}
		})
	}
}

// An outboard load that fails while the request is still delivering ends
// the request: its bytes could not be verified.
func TestOutboardFailureEndsRequest(t *testing.T) {
	e := newEnv(t)
	m := e.member(4 * BlockSize)
	e.store.Faults = func(request, int) fault { return fault{Stall: true, Cut: BlockSize / 2} }
	denied := fmt.Errorf("outboard: %w", store.ErrAccessDenied)
	// A request left running would stall, be cut off and be retried.
	cfg := Config{ReadaheadMax: -1, StallTimeout: time.Second, ReadTimeout: 4 * time.Second}
	r, tr := gatedReader(t, e, cfg, func(_ *Reader, tr *trace) func(context.Context) error {
		return func(ctx context.Context) error {
			if err := until(tr.req)(ctx); err != nil {
				return err
			}
			return denied
		}
	})
	_, err := r.ReadAt(context.Background(), m, make([]byte, 4096), 0)
	if !errors.Is(err, store.ErrAccessDenied) || !errors.Is(err, errOutboard) || errors.Is(err, errGate) {
		t.Fatalf("ReadAt: %v; want the outboard's failure (trace %q)", err, tr.all())
	}
	r.Close()
	if st := r.Stats(); st.Requests != 1 || st.Retries != 0 || tr.index("body closed") < 0 {
		t.Fatalf("stats %+v, trace %q; want the one request ended, not retried", st, tr.all())
	}
}

// A store that refuses the block while the outboard loads fails the read
// with the store's answer and its event, as before.
func TestBlockFailsWithOutboardIn(t *testing.T) {
	e := newEnv(t)
	m := e.member(3 * BlockSize)
	delete(e.store.objs, m.Object)
	r, tr := gatedReader(t, e, Config{ReadaheadMax: -1}, func(_ *Reader, tr *trace) func(context.Context) error { return until(tr.req) })
	_, err := r.ReadAt(context.Background(), m, make([]byte, 4096), 0)
	if !errors.Is(err, store.ErrNotFound) || errors.Is(err, errOutboard) {
		t.Fatalf("ReadAt: %v; want the store's not found (trace %q)", err, tr.all())
	}
	if ev := e.rec.all(); len(ev) != 1 || ev[0].Kind != KindVersionMissing {
		t.Fatalf("events %+v; want one version_missing", ev)
	}
}

// A member of one block is one request, verified by its digest, with no
// outboard load; a member whose outboard is cached loads none either.
func TestNoOutboardLoad(t *testing.T) {
	e := newEnv(t)
	noLoad := func(context.Context) error { return fmt.Errorf("outboard loaded: %w", store.ErrAccessDenied) }
	r, tr := gatedReader(t, e, Config{MemBytes: 32 << 20}, func(*Reader, *trace) func(context.Context) error { return noLoad })
	for _, size := range []int64{5000, BlockSize} {
		m := e.member(size)
		before := len(e.store.requests())
		readHead(t, e, r, m, tr)
		if n := len(e.store.requests()) - before; n != 1 {
			t.Fatalf("member of %d bytes: %d requests, want 1", size, n)
		}
	}
	if st := r.Stats(); st.OutboardLoads != 0 || tr.index("outboard") >= 0 {
		t.Fatalf("%d outboard loads for members of one block (trace %q)", st.OutboardLoads, tr.all())
	}

	e2 := newEnv(t)
	m := e2.member(4 * BlockSize)
	r2, tr2 := gatedReader(t, e2, Config{MemBytes: 32 << 20, ReadaheadMax: -1}, nil)
	readHead(t, e2, r2, m, tr2)
	tr2.mu.Lock()
	tr2.steps = nil
	tr2.mu.Unlock()
	p := make([]byte, 4096)
	if _, err := r2.ReadAt(context.Background(), m, p, 3*BlockSize); err != nil {
		t.Fatal(err)
	}
	// The head's body may be closed after the trace was reset: only the
	// requests and outboard loads count.
	want := fmt.Sprintf("request %d+", 3*BlockSize)
	if tr2.index("outboard") >= 0 || tr2.count("request") != 1 || tr2.index(want) < 0 {
		t.Fatalf("trace %q: want block 3's request and no outboard load", tr2.all())
	}
}

// Closing the Reader, or the reader's context ending, while the outboard
// still loads and the block is in: Close cancels both and returns; a
// reader that gives up returns at once, and the flight goes on to cache
// the block once the outboard arrives.
func TestStopWhileOutboardLoads(t *testing.T) {
	t.Run("close", func(t *testing.T) {
		e := newEnv(t)
		m := e.member(2 * BlockSize)
		r, tr := gatedReader(t, e, Config{ReadaheadMax: -1}, func(_ *Reader, tr *trace) func(context.Context) error {
			return func(ctx context.Context) error {
				if err := until(tr.req)(ctx); err != nil {
					return err
				}
				<-ctx.Done()
				return ctx.Err()
			}
		})
		done := make(chan error, 1)
		go func() {
			_, err := r.ReadAt(context.Background(), m, make([]byte, 4096), 0)
			done <- err
		}()
		select {
		case <-tr.closed:
		case <-time.After(gateBound):
			t.Fatalf("no block body read while the outboard loads (trace %q)", tr.all())
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatalf("ReadAt: %v; want ErrClosed", err)
		}
	})
	t.Run("reader canceled", func(t *testing.T) {
		e := newEnv(t)
		m := e.member(2 * BlockSize)
		release := make(chan struct{})
		r, tr := gatedReader(t, e, Config{MemBytes: 8 << 20, ReadaheadMax: -1}, func(_ *Reader, tr *trace) func(context.Context) error {
			return until(release)
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := r.ReadAt(ctx, m, make([]byte, 4096), 0)
			done <- err
		}()
		select {
		case <-tr.closed:
		case <-time.After(gateBound):
			t.Fatalf("no block body read while the outboard loads (trace %q)", tr.all())
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("ReadAt: %v; want context.Canceled", err)
		}
		close(release)
		readHead(t, e, r, m, tr)
		if st := r.Stats(); st.Requests != 1 || st.BlocksVerified != 1 {
			t.Fatalf("stats %+v; want the first flight's block, one request", st)
		}
	})
}

// A run that holds a block from the disk tier next to the blocks it
// requests verifies that block too with the outboard loaded in parallel.
func TestDiskBlockWithOutboardInParallel(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	m := e.member(4 * BlockSize)
	r0 := e.reader(Config{Disk: diskDir(t, dir, 64<<20), ReadaheadMax: -1})
	if _, err := r0.ReadAt(context.Background(), m, make([]byte, 10), BlockSize); err != nil {
		t.Fatal(err)
	}
	r0.Close() // waits for the disk write of block 1
	e.obs.calls = nil
	r, tr := gatedReader(t, e, Config{MemBytes: 16 << 20, Disk: diskDir(t, dir, 64<<20)}, func(_ *Reader, tr *trace) func(context.Context) error { return until(tr.req) })
	p := make([]byte, 2*BlockSize)
	if _, err := r.ReadAt(context.Background(), m, p, 0); err != nil {
		t.Fatalf("ReadAt: %v (trace %q)", err, tr.all())
	}
	if !bytes.Equal(p, e.data[m.Digest][:len(p)]) {
		t.Fatal("bytes differ from the source")
	}
	if st := r.Stats(); st.DiskHits != 1 {
		t.Fatalf("stats %+v; want block 1 from the disk tier", st)
	}
	if plain, fresh := e.obs.ncalls(); plain != 1 || fresh != 0 {
		t.Fatalf("outboard loads %d plain, %d fresh; want 1, 0", plain, fresh)
	}
}
