package blocks

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/verify/b3"
)

// request is one ReadRange call seen by the fake store.
type request struct {
	Obj    store.Object
	Off, N int64
}

// fault is what the fake store does to one request.
type fault struct {
	Err     error         // ReadRange fails with Err
	Corrupt bool          // one byte of the body is flipped
	Cut     int           // with Stall or Short: bytes delivered first
	Short   bool          // the body ends after Cut bytes
	Stall   bool          // after Cut bytes the body delivers nothing until ctx or Close ends it
	Hang    bool          // ReadRange itself waits for ctx (no response headers)
	Wait    chan struct{} // ReadRange waits for this channel to close first
}

// fakeStore is an in-memory store.ObjectReader that counts requests and
// injects faults. Faults is consulted for every request, under the lock,
// with the number of earlier requests of the same range start.
type fakeStore struct {
	mu     sync.Mutex
	objs   map[store.Object][]byte
	reqs   []request
	ends   []time.Time // the deadline of each request's context, zero if none
	Faults func(req request, seen int) fault
	Delay  time.Duration // before each response
	Quiet  bool          // keep no request log (benchmarks)
}

func newFakeStore() *fakeStore { return &fakeStore{objs: make(map[store.Object][]byte)} }

func (s *fakeStore) ReadRange(ctx context.Context, obj store.Object, off, n int64) (io.ReadCloser, error) {
	if err := obj.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	req := request{obj, off, n}
	seen := 0
	for _, q := range s.reqs {
		if q.Obj == obj && q.Off == off {
			seen++
		}
	}
	if !s.Quiet {
		s.reqs = append(s.reqs, req)
		end, _ := ctx.Deadline()
		s.ends = append(s.ends, end)
	}
	var f fault
	if s.Faults != nil {
		f = s.Faults(req, seen)
	}
	data, ok := s.objs[obj]
	s.mu.Unlock()

	if f.Wait != nil {
		select {
		case <-f.Wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if s.Delay > 0 {
		select {
		case <-time.After(s.Delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.Hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if f.Err != nil {
		return nil, f.Err
	}
	if !ok {
		return nil, fmt.Errorf("fake: %v: %w", obj, store.ErrNotFound)
	}
	if off > int64(len(data)) || n < 0 || off+n > int64(len(data)) {
		return nil, fmt.Errorf("fake: range %d+%d of %d bytes", off, n, len(data))
	}
	body := data[off : off+n : off+n] // read only, like a socket's bytes
	if f.Corrupt && len(body) > 0 {
		body = bytes.Clone(body)
		body[len(body)/2] ^= 0x40
	}
	b := &fakeBody{ctx: ctx, data: body, closed: make(chan struct{})}
	if f.Short || f.Stall {
		b.data = body[:f.Cut]
		b.stall = f.Stall
	}
	return store.ExactReader(b, n), nil
}

func (s *fakeStore) Stat(ctx context.Context, obj store.Object) (store.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.objs[obj]
	if !ok {
		return store.Info{}, store.ErrNotFound
	}
	return store.Info{Size: int64(len(data))}, nil
}

// requests returns a copy of the requests seen so far.
func (s *fakeStore) requests() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.reqs...)
}

// deadlines returns the deadline of each request so far, in order.
func (s *fakeStore) deadlines() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.ends...)
}

// perBlock counts how often each block of each object was requested
// (a span request covers several blocks).
func (s *fakeStore) perBlock() map[request]int {
	c := make(map[request]int)
	for _, q := range s.requests() {
		for off := q.Off / BlockSize * BlockSize; off < q.Off+q.N; off += BlockSize {
			c[request{Obj: q.Obj, Off: off}]++
		}
	}
	return c
}

// perRange counts the requests of each (object, offset).
func (s *fakeStore) perRange() map[request]int {
	c := make(map[request]int)
	for _, q := range s.requests() {
		q.N = 0
		c[q]++
	}
	return c
}

type fakeBody struct {
	ctx       context.Context
	data      []byte
	stall     bool
	closed    chan struct{}
	closeOnce sync.Once
}

func (b *fakeBody) Read(p []byte) (int, error) {
	if len(b.data) > 0 {
		n := copy(p, b.data)
		b.data = b.data[n:]
		return n, nil
	}
	if b.stall {
		select {
		case <-b.ctx.Done():
			return 0, b.ctx.Err()
		case <-b.closed:
			return 0, fmt.Errorf("read on closed body")
		}
	}
	return 0, io.EOF
}

func (b *fakeBody) Close() error {
	b.closeOnce.Do(func() { close(b.closed) })
	return nil
}

// fakeOutboards serves outboards from a map and counts calls. Bad makes
// the non-fresh answer for a digest a damaged copy; Fail, if set, is
// consulted first and fails the call with the error it returns.
type fakeOutboards struct {
	mu    sync.Mutex
	obs   map[b3.Sum][]byte
	bad   map[b3.Sum]bool
	calls []bool // the fresh flag of each call
	Fail  func() error
}

func (o *fakeOutboards) Outboard(ctx context.Context, d b3.Sum, size int64, fresh bool) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, fresh)
	if o.Fail != nil {
		if err := o.Fail(); err != nil {
			return nil, err
		}
	}
	ob, ok := o.obs[d]
	if !ok {
		return nil, fmt.Errorf("fake outboard %v: %w", d, store.ErrNotFound)
	}
	if o.bad[d] && !fresh {
		ob = bytes.Clone(ob)
		ob[len(ob)-1] ^= 1
	}
	return ob, nil
}

func (o *fakeOutboards) ncalls() (plain, fresh int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, f := range o.calls {
		if f {
			fresh++
		} else {
			plain++
		}
	}
	return plain, fresh
}

// recorder is a Reporter that keeps events in order. With fail set it
// keeps none and returns fail, as a run record that cannot write would.
// OnReport, if set, is called with each event before it is kept.
type recorder struct {
	mu       sync.Mutex
	events   []Event
	fail     error
	OnReport func(Event)
}

func (r *recorder) Report(ctx context.Context, ev Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.OnReport != nil {
		r.OnReport(ev)
	}
	if r.fail != nil {
		return r.fail
	}
	r.events = append(r.events, ev)
	return nil
}

// failWith makes every later Report fail with err (nil: succeed again).
func (r *recorder) failWith(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = err
}

func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// env is a store, its outboards, a recorder and a way to make members.
type env struct {
	t     testing.TB
	store *fakeStore
	obs   *fakeOutboards
	rec   *recorder
	data  map[b3.Sum][]byte
	n     int
}

func newEnv(t testing.TB) *env {
	return &env{t: t, store: newFakeStore(), obs: &fakeOutboards{obs: map[b3.Sum][]byte{}, bad: map[b3.Sum]bool{}},
		rec: &recorder{}, data: map[b3.Sum][]byte{}}
}

// member adds a member of size random bytes and returns it. Members of
// more than b3.GroupSize get a stored outboard, as pinfs pin does.
func (e *env) member(size int64) *Member {
	e.t.Helper()
	e.n++
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(uint64(size), uint64(e.n)))
	// Eight bytes per draw: a byte at a time made the data of a 300 MiB
	// member most of a test's time under the race detector.
	var w [8]byte
	for i := 0; i < len(data); i += 8 {
		binary.LittleEndian.PutUint64(w[:], rng.Uint64())
		copy(data[i:], w[:])
	}
	d, ob, err := b3.Encode(bytes.NewReader(data), size)
	if err != nil {
		e.t.Fatal(err)
	}
	obj, err := store.NewVersion("bucket", fmt.Sprintf("m%d", e.n), fmt.Sprintf("v%d", e.n))
	if err != nil {
		e.t.Fatal(err)
	}
	e.store.mu.Lock()
	e.store.objs[obj] = data
	e.store.mu.Unlock()
	if size > b3.GroupSize {
		e.obs.mu.Lock()
		e.obs.obs[d] = ob
		e.obs.mu.Unlock()
	}
	e.data[d] = data
	return &Member{Path: fmt.Sprintf("dir/m%d", e.n), ID: fmt.Sprint(e.n), Digest: d, Size: size, Object: obj}
}

// reader returns a Reader over the env with cfg's tuning, closed at
// cleanup; cfg.Objects, if set, stands in front of the env's store.
func (e *env) reader(cfg Config) *Reader {
	e.t.Helper()
	if cfg.Objects == nil {
		cfg.Objects = e.store
	}
	cfg.Outboards, cfg.Reporter = e.obs, e.rec
	if cfg.Backoff == 0 {
		cfg.Backoff = time.Millisecond
	}
	r, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		r.Close()
		// Every block the Reader loaded went back to its pool: nothing
		// a flight, a read, a tier or the budget took was leaked.
		if st := r.Pool().Stats(); cfg.Pool == nil && st.Free != st.Slots {
			e.t.Errorf("after Close, %d of %d pool slots still held: %v", st.Slots-st.Free, st.Slots, st.InUse)
		}
	})
	return r
}

// readAll reads m with reads of size chunk and checks the bytes.
func (e *env) readAll(r *Reader, m *Member, chunk int) {
	e.t.Helper()
	got := make([]byte, 0, m.Size)
	buf := make([]byte, chunk)
	for off := int64(0); off < m.Size; {
		n, err := r.ReadAt(context.Background(), m, buf, off)
		if err != nil && err != io.EOF {
			e.t.Fatalf("ReadAt(%s, %d): %v", m.Path, off, err)
		}
		if n < len(buf) && off+int64(n) < m.Size {
			e.t.Fatalf("ReadAt(%s, %d): short read of %d bytes before the end", m.Path, off, n)
		}
		got = append(got, buf[:n]...)
		off += int64(n)
	}
	if !bytes.Equal(got, e.data[m.Digest]) {
		e.t.Fatalf("%s: bytes differ from the source", m.Path)
	}
}

// diskDir opens a disk tier in dir.
func diskDir(t testing.TB, dir string, limit int64) *cache.Disk {
	t.Helper()
	d, err := cache.OpenDisk(dir, limit)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
