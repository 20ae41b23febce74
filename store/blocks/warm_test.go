package blocks

import (
	"context"
	"errors"
	"testing"

	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/verify/b3"
)

// Warm fetches each block the disk tier lacks once, in runs, reports every
// block's bytes, and leaves them all in the disk tier, where a second
// Reader finds them without the store.
func TestWarm(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	disk := diskDir(t, dir, 64<<20)
	m := e.member(20*BlockSize + 777)
	// Blocks 3 and 4 are on disk already.
	r0 := e.reader(Config{Disk: disk, ReadaheadMax: -1})
	readAt(t, r0, m, e.data[m.Digest], 3*BlockSize, 2*BlockSize)
	r0.Close()
	e.store.reqs = nil

	r := e.reader(Config{MemBytes: 4 << 20, Disk: disk})
	var total, calls int64
	if err := r.Warm(context.Background(), m, func(n int64) { total += n; calls++ }); err != nil {
		t.Fatal(err)
	}
	if total != m.Size || calls != numBlocks(m.Size) {
		t.Fatalf("progress reported %d bytes in %d calls, want %d in %d", total, calls, m.Size, numBlocks(m.Size))
	}
	per := e.store.perBlock()
	for i := range numBlocks(m.Size) {
		c := per[request{Obj: m.Object, Off: i * BlockSize}]
		if want := map[bool]int{true: 0, false: 1}[i == 3 || i == 4]; c != want {
			t.Errorf("block %d requested %d times, want %d", i, c, want)
		}
		if !disk.Has(cache.Key{Digest: m.Digest, Index: i}, m.Size) {
			t.Errorf("block %d not in the disk tier after Warm", i)
		}
	}
	if n := len(e.store.requests()); n >= 19 {
		t.Errorf("%d requests for 19 blocks: Warm does not fetch in runs", n)
	}
	r.Close()

	e.store.reqs = nil
	r2 := e.reader(Config{MemBytes: 4 << 20, Disk: diskDir(t, dir, 64<<20)})
	e.readAll(r2, m, BlockSize)
	if n := len(e.store.requests()); n != 0 {
		t.Fatalf("a read after Warm made %d requests", n)
	}
}

// Warm keeps several requests in flight: the store holds every request
// until two are waiting at once, which a Warm that fetched one run at a
// time would never reach.
func TestWarmParallel(t *testing.T) {
	e := newEnv(t)
	r := e.reader(Config{MemBytes: 4 << 20, Disk: diskDir(t, t.TempDir(), 64<<20), SpanBlocks: 2, ReadaheadMax: 8 * BlockSize})
	m := e.member(8 * BlockSize)
	gate := make(chan struct{})
	e.store.Faults = func(request, int) fault { return fault{Wait: gate} }
	done := make(chan error, 1)
	go func() { done <- r.Warm(context.Background(), m, nil) }()
	waitFor(t, func() bool { return len(e.store.requests()) >= 2 })
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A block that fails verification fails Warm with b3.ErrMismatch, and no
// damaged byte reaches the disk tier; without a disk tier Warm still
// loads and verifies every block.
func TestWarmMismatch(t *testing.T) {
	e := newEnv(t)
	disk := diskDir(t, t.TempDir(), 64<<20)
	r := e.reader(Config{MemBytes: 4 << 20, Disk: disk})
	m := e.member(3 * BlockSize)
	e.store.Faults = func(q request, seen int) fault { return fault{Corrupt: true} }
	err := r.Warm(context.Background(), m, nil)
	if !errors.Is(err, b3.ErrMismatch) {
		t.Fatalf("Warm of a damaged member: %v; want b3.ErrMismatch", err)
	}
	r.Close()
	// The fake damages the middle byte of each body: block 1 of the run's
	// request and of every request for block 1 alone.
	if disk.Has(cache.Key{Digest: m.Digest, Index: 1}, m.Size) {
		t.Error("the damaged block is in the disk tier")
	}
	if ev := e.rec.all(); len(ev) == 0 || ev[0].Kind != KindMismatch {
		t.Fatalf("events %+v; want a mismatch", ev)
	}

	e.store.Faults = nil
	r2 := e.reader(Config{MemBytes: 8 << 20})
	var total int64
	if err := r2.Warm(context.Background(), m, func(n int64) { total += n }); err != nil || total != m.Size {
		t.Fatalf("Warm without a disk tier: %v, %d bytes", err, total)
	}
	if st := r2.Stats(); st.BlocksVerified != 3 {
		t.Fatalf("stats %+v, want 3 blocks verified", st)
	}
	r2.Close()
	if err := r2.Warm(context.Background(), m, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Warm after Close: %v", err)
	}
}
