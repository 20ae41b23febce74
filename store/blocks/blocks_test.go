package blocks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/store/pool"
	"github.com/pinfs/pinfs/verify/b3"
)

var sizes = []int64{1, 100, b3.GroupSize - 1, b3.GroupSize, b3.GroupSize + 1, 3*b3.GroupSize + 7,
	BlockSize - 1, BlockSize, BlockSize + 1, 3*BlockSize + 12345}

// The small-member outboard pinfs synthesizes is what b3.Encode produces,
// and b3.Verify accepts it for the right bytes only.
func TestSmallOutboard(t *testing.T) {
	for _, size := range []int64{1, 100, 1024, b3.GroupSize - 1, b3.GroupSize} {
		data := bytes.Repeat([]byte{7}, int(size))
		d, ob, err := b3.Encode(bytes.NewReader(data), size)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ob, smallOutboard(size)) {
			t.Fatalf("size %d: stored outboard %x, synthesized %x", size, ob, smallOutboard(size))
		}
		if err := b3.Verify(d, smallOutboard(size), size, 0, data); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		data[size/2] ^= 1
		if err := b3.Verify(d, smallOutboard(size), size, 0, data); !errors.Is(err, b3.ErrMismatch) {
			t.Fatalf("size %d: damaged bytes verified: %v", size, err)
		}
	}
}

// readAt is ReadAt with the io.ReaderAt checks of the EOF convention.
func readAt(t *testing.T, r *Reader, m *Member, src []byte, off int64, n int) {
	t.Helper()
	p := make([]byte, n)
	got, err := r.ReadAt(context.Background(), m, p, off)
	want := max(0, min(int64(n), m.Size-off))
	switch {
	case n == 0 && (got != 0 || err != nil):
		t.Fatalf("%s: empty read at %d = %d, %v", m.Path, off, got, err)
	case int64(got) != want:
		t.Fatalf("%s: ReadAt(%d, len %d) = %d bytes, %v; want %d", m.Path, off, n, got, err, want)
	case got < n && err != io.EOF:
		t.Fatalf("%s: short read at %d: err %v, want io.EOF", m.Path, off, err)
	case got == n && err != nil:
		t.Fatalf("%s: full read at %d: err %v", m.Path, off, err)
	}
	if got > 0 && !bytes.Equal(p[:got], src[off:off+int64(got)]) {
		t.Fatalf("%s: ReadAt(%d, len %d): bytes differ", m.Path, off, n)
	}
}

func TestReadAtRandom(t *testing.T) {
	e := newEnv(t)
	for _, cfg := range []Config{
		{MemBytes: 64 << 20},
		{MemBytes: 0, ReadaheadMax: -1},
		{MemBytes: 2 << 20, Disk: diskDir(t, t.TempDir(), 3<<20)},
	} {
		r := e.reader(cfg)
		rng := rand.New(rand.NewPCG(1, 2))
		for _, size := range append(sizes, 0) {
			m := e.member(size)
			src := e.data[m.Digest]
			for _, off := range []int64{0, size - 1, size, size + 1, BlockSize - 10, BlockSize, b3.GroupSize - 1} {
				for _, n := range []int{0, 1, 20, 4096, BlockSize, 2*BlockSize + 3} {
					if off >= 0 {
						readAt(t, r, m, src, off, n)
					}
				}
			}
			for range 40 {
				off := rng.Int64N(size + 2)
				n := rng.IntN(int(min(size+10, 2*BlockSize)))
				readAt(t, r, m, src, off, n)
			}
		}
		if cfg.MemBytes == 64<<20 {
			// Everything fits in memory: no block was fetched twice.
			for q, c := range e.store.perRange() {
				if c > 1 {
					t.Errorf("%v at %d requested %d times", q.Obj, q.Off, c)
				}
			}
		}
	}
	if _, err := e.reader(Config{}).ReadAt(context.Background(), e.member(10), make([]byte, 1), -1); err == nil {
		t.Error("negative offset accepted")
	}
}

func TestEmptyAndSmallMembers(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 8 << 20})
	empty := e.member(0)
	if n, err := r.ReadAt(context.Background(), empty, make([]byte, 10), 0); n != 0 || err != io.EOF {
		t.Fatalf("empty member: %d, %v", n, err)
	}
	if len(e.store.requests()) != 0 {
		t.Fatal("an empty member was fetched")
	}
	// A member of one block is verified whole against its digest: no
	// outboard request, however many groups it has.
	for _, size := range []int64{1, b3.GroupSize, b3.GroupSize + 1, BlockSize} {
		e.readAll(r, e.member(size), 1000)
	}
	if plain, fresh := e.obs.ncalls(); plain+fresh != 0 {
		t.Fatalf("Outboards called %d times for single-block members", plain+fresh)
	}
	e.readAll(r, e.member(BlockSize+1), 1000)
	if plain, _ := e.obs.ncalls(); plain != 1 {
		t.Fatalf("Outboards called %d times for one multi-block member", plain)
	}
}

// Many readers of the same blocks at once share one request per block.
func TestConcurrentReadersSingleFetch(t *testing.T) {
	e := newEnv(t)
	e.store.Delay = 20 * time.Millisecond // keep flights open while readers arrive
	r := e.reader(Config{MemBytes: 64 << 20})
	ms := []*Member{e.member(4*BlockSize + 100), e.member(BlockSize), e.member(5000)}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			m := ms[g%len(ms)]
			src := e.data[m.Digest]
			rng := rand.New(rand.NewPCG(uint64(g), 0))
			for range 30 {
				off := rng.Int64N(m.Size)
				p := make([]byte, rng.IntN(3*BlockSize/2)+1)
				n, err := r.ReadAt(context.Background(), m, p, off)
				if err != nil && err != io.EOF || !bytes.Equal(p[:n], src[off:off+int64(n)]) {
					t.Errorf("%s at %d: %d, %v", m.Path, off, n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for q, c := range e.store.perBlock() {
		if c != 1 {
			t.Errorf("%v at %d requested %d times", q.Obj, q.Off, c)
		}
	}
	if got, want := len(e.store.perBlock()), 5+1+1; got != want {
		t.Errorf("%d blocks fetched, want %d", got, want)
	}
	if plain, fresh := e.obs.ncalls(); plain != 1 || fresh != 0 { // the 1 MiB and 5000-byte members need none
		t.Errorf("outboard loads %d plain, %d fresh; want 1, 0", plain, fresh)
	}
}

// corruptAt returns faults that damage the first k responses for block
// offset off of obj.
func corruptAt(obj store.Object, off int64, k int) func(request, int) fault {
	return func(q request, seen int) fault {
		return fault{Corrupt: q.Obj == obj && q.Off == off && seen < k}
	}
}

func TestNetworkCorruptionOnce(t *testing.T) {
	e := newEnv(t)
	disk := diskDir(t, t.TempDir(), 64<<20)
	r := e.reader(Config{MemBytes: 64 << 20, Disk: disk, ReadaheadMax: -1})
	m := e.member(3*BlockSize + 5)
	e.store.Faults = corruptAt(m.Object, BlockSize, 1)
	e.readAll(r, m, 128<<10)
	if c := e.store.perRange()[request{Obj: m.Object, Off: BlockSize}]; c != 2 {
		t.Fatalf("damaged block requested %d times, want 2", c)
	}
	if st := r.Stats(); st.Mismatches != 1 || st.BlocksVerified != 4 {
		t.Fatalf("stats %+v", st)
	}
	if ev := e.rec.all(); len(ev) != 1 || ev[0].Kind != KindMismatch || ev[0].From != FromNetwork ||
		ev[0].Off != BlockSize || !strings.Contains(ev[0].Err.Error(), "healed") {
		t.Fatalf("a healed network mismatch is reported once, as healed: %+v", ev)
	}
}

func TestNetworkCorruptionTwice(t *testing.T) {
	e := newEnv(t)
	disk := diskDir(t, t.TempDir(), 64<<20)
	r := e.reader(Config{MemBytes: 64 << 20, Disk: disk, ReadaheadMax: -1})
	m := e.member(3*BlockSize + 5)
	other := e.member(2 * BlockSize)
	e.store.Faults = corruptAt(m.Object, BlockSize, 2)

	p := make([]byte, 2*BlockSize)
	n, err := r.ReadAt(context.Background(), m, p, BlockSize/2)
	if !errors.Is(err, b3.ErrMismatch) {
		t.Fatalf("ReadAt: %d, %v; want ErrMismatch", n, err)
	}
	src := e.data[m.Digest]
	if n != BlockSize/2 || !bytes.Equal(p[:n], src[BlockSize/2:BlockSize]) {
		t.Fatalf("ReadAt returned %d bytes before the bad block, want the %d verified ones", n, BlockSize/2)
	}
	if !bytes.Equal(p[n:], make([]byte, len(p)-n)) {
		t.Fatal("bytes of the bad block reached the caller's buffer")
	}
	ev := e.rec.all()
	want := Event{Kind: KindMismatch, Off: BlockSize, Len: BlockSize, From: FromNetwork}
	if len(ev) != 1 || ev[0].Kind != want.Kind || ev[0].Off != want.Off || ev[0].Len != want.Len ||
		ev[0].From != want.From || ev[0].Member.Path != m.Path || !errors.Is(ev[0].Err, b3.ErrMismatch) {
		t.Fatalf("events %+v, want one like %+v", ev, want)
	}
	if plain, fresh := e.obs.ncalls(); plain != 1 || fresh != 1 {
		t.Fatalf("outboard loads %d plain, %d fresh; want 1, 1", plain, fresh)
	}
	k := cache.Key{Digest: m.Digest, Index: 1}
	r.mem.Wait()
	if b, ok := r.mem.Get(k, pool.Reader); ok {
		b.Release(pool.Reader)
		t.Fatal("the bad block is in the memory tier")
	}
	if _, ok := disk.Get(k, m.Size); ok {
		t.Fatal("the bad block is in the disk tier")
	}
	// Other members, and other blocks of this one, still read.
	e.readAll(r, other, 256<<10)
	readAt(t, r, m, src, 2*BlockSize, 100)
	// The failure is not remembered: once the store heals, so does the read.
	e.store.mu.Lock()
	e.store.Faults = nil
	e.store.mu.Unlock()
	e.readAll(r, m, BlockSize)
}

// A block whose bytes are wrong in the disk tier is removed, reported and
// fetched again; a second Reader over the same directory (a remount)
// serves from disk without the network.
func TestDiskTier(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	m := e.member(3*BlockSize + 5)
	small := e.member(1000)
	r1 := e.reader(Config{MemBytes: 64 << 20, Disk: diskDir(t, dir, 64<<20)})
	e.readAll(r1, m, 100<<10)
	e.readAll(r1, small, 100)
	r1.Close()
	if n := len(e.store.perBlock()); n != 5 {
		t.Fatalf("first reader fetched %d blocks, want 5", n)
	}
	for q, c := range e.store.perBlock() {
		if c != 1 {
			t.Fatalf("block at %d fetched %d times", q.Off, c)
		}
	}

	// Remount: everything from disk.
	e.store.reqs = nil
	r2 := e.reader(Config{MemBytes: 64 << 20, Disk: diskDir(t, dir, 64<<20)})
	e.readAll(r2, m, 100<<10)
	e.readAll(r2, small, 100)
	if n := len(e.store.requests()); n != 0 {
		t.Fatalf("remount made %d requests, want 0", n)
	}
	if st := r2.Stats(); st.DiskHits != 5 || st.NetworkFetches != 0 {
		t.Fatalf("remount stats %+v", st)
	}
	r2.Close()

	// Damage block 2 (flip a byte) of the member's whole-member file: the
	// block fails verification, and the file, which cannot lose one block,
	// goes with it; the blocks after it are fetched again.
	path := filepath.Join(dir, m.Digest.Hex()[:2], m.Digest.Hex())
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[2*BlockSize+12345] ^= 1
	os.Chmod(path, 0o600)
	os.WriteFile(path, b, 0o400)

	r3 := e.reader(Config{MemBytes: 64 << 20, Disk: diskDir(t, dir, 64<<20), ReadaheadMax: -1})
	e.readAll(r3, m, 100<<10)
	reqs := e.store.perRange()
	if len(reqs) != 2 || reqs[request{Obj: m.Object, Off: 2 * BlockSize}] != 1 || reqs[request{Obj: m.Object, Off: 3 * BlockSize}] != 1 {
		t.Fatalf("requests after disk damage: %v", reqs)
	}
	ev := e.rec.all()
	if len(ev) != 1 || ev[0].Kind != KindMismatch || ev[0].From != FromDisk || ev[0].Off != 2*BlockSize ||
		ev[0].Len != BlockSize || !errors.Is(ev[0].Err, b3.ErrMismatch) {
		t.Fatalf("events %+v, want one disk mismatch at block 2", ev)
	}
	r3.Close()

	// A whole-member file cut short (to a group boundary: a prefix that
	// would verify as a shorter range) is no member file: removed, and
	// every block fetched again, with no bytes of it served.
	e.store.reqs = nil
	heal := diskDir(t, dir, 64<<20)
	e.readAll(e.reader(Config{MemBytes: 64 << 20, Disk: heal}), m, 100<<10)
	heal.Flush() // else the write-behind may complete the file after the cut
	e.store.reqs = nil
	if err := os.Truncate(path, b3.GroupSize); err != nil {
		t.Fatal(err)
	}
	r4 := e.reader(Config{MemBytes: 64 << 20, Disk: diskDir(t, dir, 64<<20)})
	e.readAll(r4, m, 100<<10)
	if st := r4.Stats(); st.DiskHits != 0 || st.NetworkFetches == 0 {
		t.Fatalf("stats after the file was cut short: %+v", st)
	}
	r4.Close()
	// The disk tier holds the good bytes again, as one file.
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, e.data[m.Digest]) {
		t.Errorf("whole-member file not healed: %v", err)
	}
	noTemp(t, dir)
}

func noTemp(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".tmp-") {
			t.Errorf("temp file left: %s", p)
		}
		return nil
	})
}

// The disk tier stays within its budget, evicting the least recently used
// members. The reads are random-access (no readahead, so no sequential
// stream): a stream of a member larger than the budget would not be
// written at all (TestDiskSkipsLargeStreams).
func TestDiskBudget(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	const limit = 4*BlockSize + BlockSize/2
	r := e.reader(Config{MemBytes: 2 << 20, Disk: diskDir(t, dir, limit), ReadaheadMax: -1})
	for range 8 {
		e.readAll(r, e.member(BlockSize+BlockSize/2), 256<<10)
	}
	r.Close()
	// A listing (a reopen) counts what the files hold.
	total := diskDir(t, dir, limit).Stats().Bytes
	if total > limit || total < 3*BlockSize {
		t.Fatalf("disk tier holds %d bytes, budget %d", total, limit)
	}
	if st := r.Stats().Disk; st.Writes < 16 || st.Evictions != st.Writes-st.Blocks || st.Bytes != total {
		t.Fatalf("disk stats %+v, %d bytes in files", st, total)
	}
	noTemp(t, dir)
}

// A sequential stream of a member larger than the disk budget is not
// written to disk; one that fits is, and so are random reads of the large
// member. Every block is still verified and served.
func TestDiskSkipsLargeStreams(t *testing.T) {
	e := newEnv(t)
	const limit = 4 * BlockSize
	disk := diskDir(t, t.TempDir(), limit)
	r := e.reader(Config{MemBytes: 2 << 20, Disk: disk})
	large, small := e.member(6*BlockSize), e.member(3*BlockSize+5)
	e.readAll(r, large, 256<<10)
	e.readAll(r, small, 256<<10)
	r.Close() // waits for the flights' disk writes
	for i := range int64(6) {
		if disk.Has(cache.Key{Digest: large.Digest, Index: i}, large.Size) {
			t.Errorf("block %d of a stream larger than the disk budget was written", i)
		}
	}
	for i := range int64(4) {
		if !disk.Has(cache.Key{Digest: small.Digest, Index: i}, small.Size) {
			t.Errorf("block %d of a stream within the disk budget was not written", i)
		}
	}
	if st := r.Stats(); st.BlocksVerified != 10 || st.Disk.Writes != 4 {
		t.Fatalf("stats %+v; want 10 blocks verified, 4 written", st)
	}
	// A random read of the large member (not a stream) is written.
	r2 := e.reader(Config{MemBytes: 2 << 20, Disk: disk, ReadaheadMax: -1})
	readAt(t, r2, large, e.data[large.Digest], 4*BlockSize+7, 100)
	r2.Close() // waits for the flight's disk write
	if !disk.Has(cache.Key{Digest: large.Digest, Index: 4}, large.Size) {
		t.Errorf("a random read of the large member was not written: %+v", r2.Stats())
	}
}

func TestNotFound(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 8 << 20, ReadaheadMax: -1})
	m := e.member(2 * BlockSize)
	delete(e.store.objs, m.Object) // the pinned version was deleted
	_, err := r.ReadAt(context.Background(), m, make([]byte, 10), 0)
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ReadAt: %v, want ErrNotFound", err)
	}
	if n := len(e.store.requests()); n != 1 {
		t.Fatalf("%d requests for a missing version, want 1 (no retry)", n)
	}
	ev := e.rec.all()
	if len(ev) != 1 || ev[0].Kind != KindVersionMissing || ev[0].Off != 0 || ev[0].Len != BlockSize || !errors.Is(ev[0].Err, store.ErrNotFound) {
		t.Fatalf("events %+v", ev)
	}
	if st := r.Stats(); st.VersionMissing != 1 || st.FetchFailed != 0 {
		t.Fatalf("stats %+v; want 1 version_missing event counted", st)
	}
}

// TestPermanentErrorsNotRetried: an answer that asking again cannot
// change (access denied; the wrong range from a server that ignores
// Range) fails the read at once with one request and a fetch_failed event.
func TestPermanentErrorsNotRetried(t *testing.T) {
	for _, sentinel := range []error{store.ErrAccessDenied, store.ErrBadResponse} {
		e := newEnv(t)
		r := e.reader(Config{MemBytes: 8 << 20})
		m := e.member(100)
		e.store.Faults = func(request, int) fault { return fault{Err: fmt.Errorf("answer: %w", sentinel)} }
		_, err := r.ReadAt(context.Background(), m, make([]byte, 10), 0)
		if !errors.Is(err, sentinel) {
			t.Fatalf("%v: ReadAt: %v", sentinel, err)
		}
		if n := len(e.store.requests()); n != 1 {
			t.Fatalf("%v: %d requests, want 1 (no retry)", sentinel, n)
		}
		if ev := e.rec.all(); len(ev) != 1 || ev[0].Kind != KindFetchFailed {
			t.Fatalf("%v: events %+v", sentinel, ev)
		}
	}
}

var errServer = errors.New("503 SlowDown")

func TestTransientErrorsRetried(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 8 << 20, ReadaheadMax: -1})
	m := e.member(BlockSize + 10)
	e.store.Faults = func(q request, seen int) fault {
		if seen < 3 {
			return fault{Err: errServer}
		}
		return fault{}
	}
	e.readAll(r, m, BlockSize)
	if st := r.Stats(); st.Retries != 6 || st.Requests != 8 || st.NetworkFetches != 2 {
		t.Fatalf("stats %+v", st)
	}
	if ev := e.rec.all(); len(ev) != 0 {
		t.Fatalf("events %+v", ev)
	}
}

func TestRetriesExhausted(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 8 << 20, Attempts: 3})
	m := e.member(BlockSize)
	e.store.Faults = func(request, int) fault { return fault{Err: errServer} }
	_, err := r.ReadAt(context.Background(), m, make([]byte, 10), 0)
	if !errors.Is(err, errServer) {
		t.Fatalf("ReadAt: %v", err)
	}
	if n := len(e.store.requests()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
	if ev := e.rec.all(); len(ev) != 1 || ev[0].Kind != KindFetchFailed || !errors.Is(ev[0].Err, errServer) {
		t.Fatalf("events %+v", ev)
	}
	if st := r.Stats(); st.FetchFailed != 1 || st.VersionMissing != 0 {
		t.Fatalf("stats %+v; want 1 fetch_failed event counted", st)
	}
}

func TestShortBodyResumed(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 8 << 20, ReadaheadMax: -1})
	m := e.member(2*BlockSize + 10)
	const cut = 300000
	e.store.Faults = func(q request, seen int) fault {
		return fault{Short: q.Off == BlockSize, Cut: cut}
	}
	readAt(t, r, m, e.data[m.Digest], BlockSize+5, 1000)
	reqs := e.store.requests()
	want := []request{{m.Object, BlockSize, BlockSize}, {m.Object, BlockSize + cut, BlockSize - cut}}
	if fmt.Sprint(reqs) != fmt.Sprint(want) {
		t.Fatalf("requests %v, want %v", reqs, want)
	}
}

func TestStallCutOff(t *testing.T) {
	for _, hang := range []bool{false, true} {
		t.Run(fmt.Sprintf("headers=%v", !hang), func(t *testing.T) {
			e := newEnv(t)
			r := e.reader(Config{MemBytes: 8 << 20, ReadaheadMax: -1, StallTimeout: 50 * time.Millisecond})
			m := e.member(BlockSize)
			const cut = 4000
			e.store.Faults = func(q request, seen int) fault {
				first := q.Off == 0 && seen == 0
				return fault{Stall: first && !hang, Hang: first && hang, Cut: cut}
			}
			start := time.Now()
			readAt(t, r, m, e.data[m.Digest], 0, BlockSize) // the right bytes
			if d := time.Since(start); d > 20*time.Second {
				t.Fatalf("stalled read took %v; the stall timeout is 50 ms", d)
			}
			// The stalled request was cut off and the rest asked for again
			// (on a busy machine a slow request may be cut off too, so the
			// count is not exact).
			resume := int64(cut)
			if hang {
				resume = 0
			}
			reqs := e.store.requests()
			resumed := false
			for _, q := range reqs[1:] {
				resumed = resumed || q.Off == resume && q.N == BlockSize-resume
			}
			if reqs[0].Off != 0 || !resumed {
				t.Fatalf("requests %v; want the stalled one, then one for bytes %d+%d", reqs, resume, BlockSize-resume)
			}
		})
	}
}

// A reader whose context is canceled returns at once; the fetch it shares
// goes on and serves the other reader.
func TestCanceledReader(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 8 << 20, ReadaheadMax: -1})
	m := e.member(BlockSize)
	release := make(chan struct{})
	e.store.Faults = func(request, int) fault { return fault{Wait: release} }

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() {
		_, err := r.ReadAt(ctx, m, make([]byte, 10), 0)
		errc <- err
	}()
	other := make(chan error)
	p := make([]byte, BlockSize)
	for len(e.store.requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	go func() {
		_, err := r.ReadAt(context.Background(), m, p, 0)
		other <- err
	}()
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled reader: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("canceled reader did not return")
	}
	close(release)
	if err := <-other; err != nil || !bytes.Equal(p, e.data[m.Digest]) {
		t.Fatalf("other reader: %v", err)
	}
	if n := len(e.store.requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

// A bad outboard from a local copy is replaced by the store's (fresh=true)
// and the block verifies without another fetch and without an event, also
// for a block that comes from the disk tier.
func TestBadCachedOutboardHeals(t *testing.T) {
	for _, fromDisk := range []bool{false, true} {
		t.Run(fmt.Sprintf("disk=%v", fromDisk), func(t *testing.T) {
			e := newEnv(t)
			dir := t.TempDir()
			m := e.member(2*BlockSize + 3)
			if fromDisk {
				r0 := e.reader(Config{Disk: diskDir(t, dir, 64<<20)})
				e.readAll(r0, m, BlockSize)
				r0.Close() // waits for the disk writes
				e.store.reqs = nil
			}
			e.obs.bad[m.Digest] = true
			e.obs.calls = nil
			r := e.reader(Config{MemBytes: 8 << 20, Disk: diskDir(t, dir, 64<<20), ReadaheadMax: -1})
			e.readAll(r, m, BlockSize)
			if plain, fresh := e.obs.ncalls(); plain != 1 || fresh != 1 {
				t.Fatalf("outboard loads %d plain, %d fresh; want 1, 1", plain, fresh)
			}
			wantReqs := 3
			if fromDisk {
				wantReqs = 0
			}
			if n := len(e.store.requests()); n != wantReqs {
				t.Fatalf("%d requests, want %d", n, wantReqs)
			}
			if ev := e.rec.all(); len(ev) != 0 {
				t.Fatalf("events %+v", ev)
			}
		})
	}
}

// Report is called before ReadAt returns the failure it describes.
func TestEventDurableBeforeReturn(t *testing.T) {
	e := newEnv(t)
	slow := &slowReporter{delay: 50 * time.Millisecond}
	r, err := New(Config{Objects: e.store, Outboards: e.obs, Reporter: slow, MemBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := e.member(10)
	delete(e.store.objs, m.Object)
	r.ReadAt(context.Background(), m, make([]byte, 1), 0)
	if slow.n.Load() != 1 {
		t.Fatal("ReadAt returned before the event was recorded")
	}
}

type slowReporter struct {
	delay time.Duration
	n     atomic.Int64
}

func (s *slowReporter) Report(ctx context.Context, ev Event) error {
	time.Sleep(s.delay)
	s.n.Add(1)
	return nil
}

func TestReadahead(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 64 << 20, ReadaheadMax: 4 * BlockSize, SpanBlocks: 1})
	m := e.member(12 * BlockSize)
	src := e.data[m.Digest]
	// Reading blocks 0 and 1 in order prefetches block 1, then 2 and 3.
	readAt(t, r, m, src, 0, 128<<10)
	readAt(t, r, m, src, BlockSize, 128<<10)
	waitFor(t, func() bool { return len(e.store.perRange()) == 4 })
	r.Close()
	if st := r.Stats(); st.Readaheads != 3 {
		t.Fatalf("stats %+v, want 3 readaheads", st)
	}

	// Random access prefetches nothing.
	e2 := newEnv(t)
	r2 := e2.reader(Config{MemBytes: 64 << 20, ReadaheadMax: 4 * BlockSize, SpanBlocks: 1})
	m2 := e2.member(12 * BlockSize)
	for _, i := range []int64{5, 2, 9, 7, 3} {
		readAt(t, r2, m2, e2.data[m2.Digest], i*BlockSize+10, 100)
	}
	r2.Close()
	if st := r2.Stats(); st.Readaheads != 0 || st.NetworkFetches != 5 {
		t.Fatalf("random reads: %+v", st)
	}

	// A sequential scan of the whole member fetches every block once.
	e3 := newEnv(t)
	r3 := e3.reader(Config{MemBytes: 64 << 20, ReadaheadMax: 4 * BlockSize})
	m3 := e3.member(12*BlockSize + 77)
	e3.readAll(r3, m3, 128<<10)
	r3.Close()
	for q, c := range e3.store.perRange() {
		if c != 1 {
			t.Errorf("block at %d requested %d times", q.Off, c)
		}
	}
	if st := r3.Stats(); st.Readaheads == 0 || st.NetworkFetches != 13 {
		t.Fatalf("sequential scan: %+v", st)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

func TestClose(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 8 << 20})
	m := e.member(BlockSize)
	e.store.Faults = func(request, int) fault { return fault{Hang: true} }
	go r.ReadAt(context.Background(), m, make([]byte, 1), 0)
	waitFor(t, func() bool { return len(e.store.requests()) > 0 })
	r.Close() // cancels the hanging fetch and waits for it
	if _, err := r.ReadAt(context.Background(), m, make([]byte, 1), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("ReadAt after Close: %v", err)
	}
	if ev := e.rec.all(); len(ev) != 0 {
		t.Fatalf("Close produced events: %+v", ev)
	}
}

// A sequential reader's blocks come in spans: few requests, every block
// fetched once, and a block that fails verification inside a span is
// fetched again on its own and healed.
func TestSpans(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 64 << 20, ReadaheadMax: 8 * BlockSize, SpanBlocks: 4})
	m := e.member(16*BlockSize + 7)
	e.store.Faults = func(q request, seen int) fault {
		// The first span that covers block 6 delivers it damaged.
		return fault{Corrupt: q.Obj == m.Object && q.N > BlockSize && q.Off <= 6*BlockSize && 6*BlockSize < q.Off+q.N && q.Off+q.N/2 >= 6*BlockSize && q.Off+q.N/2 < 7*BlockSize && seen == 0}
	}
	e.readAll(r, m, 1<<20)
	r.Close()
	var spans int
	for _, q := range e.store.requests() {
		if q.N > BlockSize {
			spans++
		}
	}
	if spans == 0 || len(e.store.requests()) > 12 {
		t.Fatalf("%d requests, %d spans, for 17 sequential blocks: %v", len(e.store.requests()), spans, e.store.requests())
	}
	for q, c := range e.store.perBlock() {
		if c != 1 && q.Off != 6*BlockSize {
			t.Errorf("block at %d fetched %d times", q.Off, c)
		}
	}
	if st := r.Stats(); st.BlocksVerified != 17 || st.Mismatches != 1 {
		t.Errorf("stats %+v, want 17 blocks verified, 1 mismatch", st)
	}
	if ev := e.rec.all(); len(ev) != 1 || ev[0].Kind != KindMismatch || ev[0].Off != 6*BlockSize {
		t.Errorf("events %+v, want the damaged copy of block 6 reported once", ev)
	}
}

// A block found in memory while a run is planned around another block
// ends the run there and is not counted as a memory hit; only blocks
// served from memory are.
func TestMemHitsCountServedBlocks(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 64 << 20, ReadaheadMax: 4 * BlockSize, SpanBlocks: 4})
	m := e.member(4 * BlockSize)
	p := make([]byte, BlockSize)
	if _, err := r.ReadAt(context.Background(), m, p, 2*BlockSize); err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < m.Size; off += BlockSize {
		if _, err := r.ReadAt(context.Background(), m, p, off); err != nil {
			t.Fatal(err)
		}
	}
	// Served from memory or a flight already started: block 2 (read
	// twice) and block 3 (readahead may have loaded it). Block 1's run is
	// planned between blocks 0 and 2, both in memory: they are not served
	// by it.
	if st := r.Stats(); st.MemHits < 1 || st.MemHits+st.Joined > 2 {
		t.Fatalf("%d memory hits, %d joined; want 1 or 2 in all, at least block 2 from memory", st.MemHits, st.Joined)
	}
}
