package blocks

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
)

// inflightStore counts the requests of an ObjectReader from the call until
// their body is closed, and the bytes they asked for, and keeps the
// largest of both.
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
	return &countedBody{ReadCloser: rc, done: func() { s.done(n) }}, nil
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
	once sync.Once
	done func()
}

func (b *countedBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}

// countedReader is e.reader over an inflightStore in front of e's store.
func (e *env) countedReader(cfg Config) (*Reader, *inflightStore) {
	e.t.Helper()
	s := &inflightStore{ObjectReader: e.store}
	cfg.Objects, cfg.Outboards, cfg.Reporter = s, e.obs, e.rec
	if cfg.Backoff == 0 {
		cfg.Backoff = time.Millisecond
	}
	r, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { r.Close() })
	return r, s
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
	m := e.member(160 * BlockSize)
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
	if st.NetworkFetches != 160 {
		t.Errorf("%d blocks fetched for 160", st.NetworkFetches)
	}
}

// Sixteen sequential readers of sixteen members share one budget: the
// bytes readahead has requested and that are not read yet never exceed
// its share, and the bytes in flight at the store never exceed that plus
// one miss run per reader.
func TestReadaheadBudgetShared(t *testing.T) {
	e := newEnv(t)
	e.store.Quiet = true
	e.store.Delay = 2 * time.Millisecond
	const (
		budget  = 48 << 20 // 16 MiB held, a 32 MiB front
		span    = 2
		readers = 16
	)
	r, s := e.countedReader(Config{MemBytes: 16 << 20, ReadaheadBudget: budget, SpanBlocks: span})
	held := int64(budget / heldShare)
	var ms []*Member
	for range readers {
		ms = append(ms, e.member(24*BlockSize))
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
			e.readAll(r, m, BlockSize)
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	_, inflight := s.peaks()
	t.Logf("at most %d MiB in flight, %d MiB held", inflight>>20, peak>>20)
	if limit := held + readers*span*BlockSize; inflight > limit {
		t.Errorf("%d MiB in flight at once; want at most %d MiB (the budget's held share and one miss per reader)", inflight>>20, limit>>20)
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
	r := e.reader(Config{MemBytes: 256 << 20, SpanBlocks: 1})
	m := e.member(200 * BlockSize)
	src := e.data[m.Digest]
	window := func() int64 {
		r.mu.Lock()
		defer r.mu.Unlock()
		s, _ := r.seq.Get(m.Digest)
		return s.window
	}
	for i := range int64(8) {
		readAt(t, r, m, src, i*BlockSize, BlockSize)
	}
	if w := window(); w != 128 {
		t.Fatalf("window %d blocks after 8 sequential reads, want 128", w)
	}
	for k, want := range []int64{0, 1, 2, 4} {
		readAt(t, r, m, src, (180+int64(k))*BlockSize, BlockSize)
		if w := window(); w != want {
			t.Fatalf("read %d after the jump: window %d blocks, want %d", k, w, want)
		}
	}
}

// The kernel's reads of one sequential stream arrive out of order (its
// readahead requests are served in parallel): a stream whose reads swap
// pairwise or arrive a few blocks early keeps its window and reads every
// block once.
func TestReadaheadKernelOrder(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 256 << 20})
	m := e.member(96 * BlockSize)
	src := e.data[m.Digest]
	order := []int64{0, 1, 2, 3}
	for i := int64(4); i < 96; i += 4 {
		order = append(order, i+1, i, i+3, i+2) // swapped pairs
	}
	for _, i := range order {
		readAt(t, r, m, src, i*BlockSize, BlockSize)
	}
	st := r.Stats()
	if st.ReadaheadWindowMax != DefaultReadaheadMax {
		t.Errorf("largest window %d MiB; want %d MiB", st.ReadaheadWindowMax>>20, DefaultReadaheadMax>>20)
	}
	for q, c := range e.store.perBlock() {
		if c != 1 {
			t.Errorf("block at %d fetched %d times", q.Off, c)
		}
	}
	if st.Readaheads == 0 || st.NetworkFetches != 96 {
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
	m := e.member(160 * BlockSize)
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
	r, s := e.countedReader(Config{Disk: diskDir(t, t.TempDir(), 512<<20), ReadaheadBudget: 12 << 20, SpanBlocks: 2})
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
