package blocks

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store/pool/pooltest"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/store/lru"
	"github.com/pinfs/pinfs/store/pool"
)

// inflightStore counts the requests of an ObjectReader from the call until
// their body has delivered its last byte (or failed, or is closed), and
// the bytes they asked for, and keeps the largest of both. A body's last
// block lands as its last byte is read, and the budget may give its room
// to a new run before the body is closed: counting until Close would see
// both at once.
type inflightStore struct {
	store.ObjectReader
	mu                       sync.Mutex
	reqs, bytes              int64
	maxReqs, maxBytes, total int64
}

func (s *inflightStore) ReadRange(ctx context.Context, obj store.Object, off, n int64) (io.ReadCloser, error) {
	s.mu.Lock()
	s.reqs++
	s.bytes += n
	s.total++
	s.maxReqs = max(s.maxReqs, s.reqs)
	s.maxBytes = max(s.maxBytes, s.bytes)
	s.mu.Unlock()
	rc, err := s.ObjectReader.ReadRange(ctx, obj, off, n)
	if err != nil {
		s.done(n)
		return nil, err
	}
	return &countedBody{ReadCloser: rc, left: n, done: func() { s.done(n) }}, nil
}

func (s *inflightStore) done(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs--
	s.bytes -= n
}

// peaks returns the most requests and bytes that were in flight at once.
func (s *inflightStore) peaks() (reqs, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxReqs, s.maxBytes
}

type countedBody struct {
	io.ReadCloser
	left int64 // bytes not delivered yet
	once sync.Once
	done func()
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); b.left <= 0 || err != nil {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *countedBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}

// countedReader is e.reader over an inflightStore in front of e's store.
func (e *env) countedReader(cfg Config) (*Reader, *inflightStore) {
	e.t.Helper()
	s := &inflightStore{ObjectReader: e.store}
	cfg.Objects = s
	return e.reader(cfg), s
}

// One sequential reader with the default configuration keeps many part
// requests of SpanBlocks blocks in flight at once: its window grows to
// ReadaheadMax (128 MiB: 16 parts of 8 MiB). With a window of 16 blocks
// and 8-block spans it had at most two readahead requests in flight and
// its own miss.
func TestReadaheadFillsTheLink(t *testing.T) {
	e := newEnv(t)
	e.store.Quiet = true
	e.store.Delay = 20 * time.Millisecond // a first byte after a round trip
	r, s := e.countedReader(Config{MemBytes: 64 << 20})
	m := e.member(136 * BlockSize)
	e.readAll(r, m, BlockSize)
	reqs, bytes := s.peaks()
	t.Logf("at most %d requests, %d MiB, in flight", reqs, bytes>>20)
	if reqs < 8 {
		t.Fatalf("a sequential reader had at most %d requests (%d MiB) in flight at once; want at least 8", reqs, bytes>>20)
	}
	st := r.Stats()
	if st.ReadaheadWindowMax != DefaultReadaheadMax {
		t.Errorf("largest window %d bytes, want %d", st.ReadaheadWindowMax, DefaultReadaheadMax)
	}
	if st.NetworkFetches != 136 {
		t.Errorf("%d blocks fetched for 136", st.NetworkFetches)
	}
}

// unread is what a test's readers have asked the store for and not read
// yet: distinct blocks requested (by readahead or a miss) less those read.
type unread struct {
	mu         sync.Mutex
	state      map[request]bool // block (object, offset) -> read
	bytes, max int64
}

func (u *unread) requested(q request) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for off := q.Off; off < q.Off+q.N; off += BlockSize {
		k := request{Obj: q.Obj, Off: off}
		if _, ok := u.state[k]; !ok {
			u.state[k] = false
			u.bytes += BlockSize
			u.max = max(u.max, u.bytes)
		}
	}
}

func (u *unread) read(m *Member, off int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	k := request{Obj: m.Object, Off: off}
	if done, ok := u.state[k]; ok && !done {
		u.state[k] = true
		u.bytes -= BlockSize
	}
}

// Sixteen slow sequential readers of sixteen members share one budget:
// the bytes requested and not read yet never exceed its held share and
// one miss per reader, though each reader's window alone could take the
// whole budget, and the memory tier is smaller than the budget.
func TestReadaheadBudgetShared(t *testing.T) {
	e := newEnv(t)
	e.store.Quiet = true
	e.store.Delay = time.Millisecond
	const (
		budget  = 16 << 20
		readers = 16
	)
	u := &unread{state: make(map[request]bool)}
	e.store.Faults = func(q request, _ int) fault { u.requested(q); return fault{} }
	r := e.reader(Config{MemBytes: 4 << 20, ReadaheadBudget: budget, ReadaheadMax: 16 * BlockSize, SpanBlocks: 1})
	const held int64 = budget
	var ms []*Member
	for range readers {
		ms = append(ms, e.member(16*BlockSize))
	}
	stop := make(chan struct{})
	var peak int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak = max(peak, r.Stats().ReadaheadBytes)
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]byte, BlockSize)
			for off := int64(0); off < m.Size; off += BlockSize {
				if _, err := r.ReadAt(context.Background(), m, p, off); err != nil {
					t.Error(err)
					return
				}
				u.read(m, off)
				time.Sleep(2 * time.Millisecond) // a reader slower than the store
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	t.Logf("at most %d MiB requested and not read, %d MiB held", u.max>>20, peak>>20)
	if limit := held + readers*BlockSize; u.max > limit {
		t.Errorf("%d MiB requested and not read at once; want at most %d MiB (the budget and one miss per reader)", u.max>>20, limit>>20)
	}
	st := r.Stats()
	if peak > held || st.ReadaheadBudget != held {
		t.Errorf("readahead held %d bytes at most, budget %d; want at most %d", peak, st.ReadaheadBudget, held)
	}
	if st.Readaheads == 0 || st.ReadaheadBytes != 0 {
		t.Errorf("stats %+v: want readahead, and nothing held once every block is read", st)
	}
}

// A random reader gets no readahead and no runs: every request is the one
// block it reads.
func TestReadaheadRandomReader(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 64 << 20})
	m := e.member(64 * BlockSize)
	src := e.data[m.Digest]
	for _, i := range []int64{37, 5, 50, 21, 62, 9, 44, 30, 14, 58} {
		readAt(t, r, m, src, i*BlockSize+4096, 4096)
	}
	for _, q := range e.store.requests() {
		if q.N != BlockSize {
			t.Errorf("a random reader's request for %d bytes at %d; want one block", q.N, q.Off)
		}
	}
	if st := r.Stats(); st.Readaheads != 0 || st.NetworkFetches != 10 || st.ReadaheadWindowMax != 0 {
		t.Fatalf("random reads: %+v", st)
	}
}

// A reader that jumps starts again at one block: the read at the jump
// gets no readahead and the reads after it a window of 1, 2, 4 blocks.
func TestReadaheadJumpResets(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 256 << 20, SpanBlocks: 1, ReadaheadMax: 32 * BlockSize})
	m := e.member(64 * BlockSize)
	src := e.data[m.Digest]
	window := func() int64 {
		r.mu.Lock()
		defer r.mu.Unlock()
		s, _ := r.seq.Get(m.Digest)
		return s.window
	}
	for i := range int64(6) {
		readAt(t, r, m, src, i*BlockSize, BlockSize)
	}
	if w := window(); w != 32 {
		t.Fatalf("window %d blocks after 6 sequential reads, want 32", w)
	}
	for k, want := range []int64{0, 1, 2, 4} {
		readAt(t, r, m, src, (50+int64(k))*BlockSize, BlockSize)
		if w := window(); w != want {
			t.Fatalf("read %d after the jump: window %d blocks, want %d", k, w, want)
		}
	}
	if n := r.Stats().ReadaheadResets; n != 1 {
		t.Fatalf("%d window resets counted, want 1", n)
	}
}

// The kernel's reads of one sequential stream arrive out of order (its
// readahead requests are served in parallel): a stream whose reads swap
// pairwise or arrive a few blocks early keeps its window and reads every
// block once.
func TestReadaheadKernelOrder(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 256 << 20})
	m := e.member(48 * BlockSize)
	src := e.data[m.Digest]
	order := []int64{0, 1, 2, 3}
	for i := int64(4); i < 48; i += 4 {
		order = append(order, i+1, i, i+3, i+2) // swapped pairs
	}
	for _, i := range order {
		readAt(t, r, m, src, i*BlockSize, BlockSize)
	}
	r.mu.Lock()
	s, _ := r.seq.Get(m.Digest)
	w := s.window
	r.mu.Unlock()
	if w != DefaultReadaheadMax/BlockSize {
		t.Errorf("window %d blocks at the end; want %d", w, DefaultReadaheadMax/BlockSize)
	}
	st := r.Stats()
	for q, c := range e.store.perBlock() {
		if c != 1 {
			t.Errorf("block at %d fetched %d times", q.Off, c)
		}
	}
	if st.Readaheads == 0 || st.NetworkFetches != 48 || st.ReadaheadResets != 0 {
		t.Errorf("stats %+v", st)
	}
}

// Warm keeps a whole window of parts in flight: with the default
// configuration 16 runs of 8 blocks.
func TestWarmWindow(t *testing.T) {
	e := newEnv(t)
	e.store.Quiet = true
	e.store.Delay = 20 * time.Millisecond
	r, s := e.countedReader(Config{Disk: diskDir(t, t.TempDir(), 512<<20)})
	m := e.member(136 * BlockSize)
	if err := r.Warm(context.Background(), m, nil); err != nil {
		t.Fatal(err)
	}
	if reqs, _ := s.peaks(); reqs < 8 {
		t.Fatalf("Warm had at most %d requests in flight; want at least 8", reqs)
	}
	if st := r.Stats(); st.ReadaheadBytes != 0 {
		t.Fatalf("%d bytes still held after Warm", st.ReadaheadBytes)
	}
}

// Warm waits for room in the budget instead of going over it, and still
// loads every block when the budget is smaller than one run.
func TestWarmBudget(t *testing.T) {
	e := newEnv(t)
	e.store.Delay = time.Millisecond
	r, s := e.countedReader(Config{Disk: diskDir(t, t.TempDir(), 512<<20), ReadaheadBudget: 4 << 20, SpanBlocks: 2})
	m := e.member(40 * BlockSize)
	var total int64
	if err := r.Warm(context.Background(), m, func(n int64) { total += n }); err != nil || total != m.Size {
		t.Fatalf("Warm: %v, %d bytes", err, total)
	}
	if _, b := s.peaks(); b > 4<<20 {
		t.Fatalf("%d MiB in flight; the budget holds 4", b>>20)
	}
	tiny, _ := e.countedReader(Config{Disk: diskDir(t, t.TempDir(), 512<<20), ReadaheadBudget: 1 << 20})
	if err := tiny.Warm(context.Background(), e.member(20*BlockSize), nil); err != nil {
		t.Fatal(err)
	}
}

// A block whose load failed, or that was loaded and has waited unread
// for the budget's stale time, gives its room back when take needs it; a
// block in flight keeps it, and a loaded one is served by the budget
// until it is read.
func TestBudgetSweep(t *testing.T) {
	p := pooltest.New(t, 2)
	b := newBudget(4 << 20)
	b.stale = time.Hour
	k := func(i int64) cache.Key { return cache.Key{Index: i} }
	var g lru.Group[cache.Key, *pool.Block]
	flying, _ := g.Start(k(3))
	if !b.take(k0, 4<<20) {
		t.Fatal("take on an empty budget failed")
	}
	holdLoaded(t, b, p, k(0), 1<<20, "block 0", false)
	holdFailed(b, k(1), 1<<20)
	holdLoaded(t, b, p, k(2), 1<<20, "block 2", false)
	b.hold(k(3), 1<<20, flying, false)
	if got, ok := loadedString(b, k(0)); !ok || got != "block 0" {
		t.Fatalf("loaded block 0: %q, %v", got, ok)
	}
	for _, i := range []int64{1, 3} {
		if _, ok := loadedString(b, k(i)); ok {
			t.Fatalf("block %d (failed or in flight) is served", i)
		}
	}
	if !b.take(k0, 1<<20) || b.bytes() != 4<<20 {
		t.Fatalf("take after the failed block: %d bytes reserved, want 4 MiB", b.bytes())
	}
	b.stale = 0 // blocks 0 and 2 are stale now
	if !b.take(k0, 1<<20) || b.bytes() != 3<<20 {
		t.Fatalf("take after the stale blocks: %d bytes reserved, want 3 MiB (block 3 and two reservations)", b.bytes())
	}
	if b.take(k0, 2<<20) {
		t.Fatal("take beyond the budget succeeded")
	}
	b.release(k(3))
	b.give(k0, 2<<20)
	if b.bytes() != 0 || len(b.held) != 0 {
		t.Fatalf("%d bytes, %d blocks held after every release", b.bytes(), len(b.held))
	}
	if !b.take(k0, 8<<20) {
		t.Fatal("a run larger than the whole budget is refused on an empty budget")
	}
}

// A readahead load that fails gives its room in the budget back at once,
// without a read of its blocks.
func TestReadaheadFailureReleases(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 64 << 20, SpanBlocks: 1, ReadaheadMax: 8 * BlockSize})
	m := e.member(32 * BlockSize)
	e.store.Faults = func(q request, _ int) fault {
		if q.Off >= 4*BlockSize {
			return fault{Err: store.ErrAccessDenied}
		}
		return fault{}
	}
	for i := range int64(4) {
		readAt(t, r, m, e.data[m.Digest], i*BlockSize, BlockSize)
	}
	waitFor(t, func() bool { return r.Stats().Readaheads > 0 && r.Stats().ReadaheadBytes == 0 })
}

// TestBudgetLoose: a loose block (read ahead beyond a small window) gives
// its room to the first take that needs it once it is loaded, long before
// staleAfter; one still in flight keeps it.
func TestBudgetLoose(t *testing.T) {
	p := pooltest.New(t, 1)
	b := newBudget(2 << 20)
	b.stale = time.Hour
	k := func(i int64) cache.Key { return cache.Key{Index: i} }
	var g lru.Group[cache.Key, *pool.Block]
	flying, _ := g.Start(k(1))
	if !b.take(k0, 2<<20) {
		t.Fatal("take on an empty budget failed")
	}
	holdLoaded(t, b, p, k(0), 1<<20, "block 0", true)
	b.hold(k(1), 1<<20, flying, true)
	if _, ok := loadedString(b, k(0)); !ok {
		t.Fatal("a loose block loaded is not served while no one needs its room")
	}
	if !b.take(k0, 1<<20) || b.bytes() != 2<<20 {
		t.Fatalf("take with a loose block loaded: %d bytes reserved, want 2 MiB (block 1 and the new reservation)", b.bytes())
	}
	if b.take(k0, 1<<20) {
		t.Fatal("a loose block in flight gave its room")
	}
}
