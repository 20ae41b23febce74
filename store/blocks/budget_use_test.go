package blocks

import (
	"context"
	"testing"
	"time"
)

// TestReadaheadHeaderReadsHoldLittle: header reads (4 KiB at offset 0 of several large members: file(1),
// a thumbnailer, a format sniffer) must not each pin a part (7 MiB) of the budget for
// staleAfter, or a sequential reader that comes next gets no readahead at
// all for that time. Scaled: a 16 MiB budget, 2 header reads.
func TestReadaheadHeaderReadsHoldLittle(t *testing.T) {
	e := newEnv(t)
	e.store.Delay = 5 * time.Millisecond
	r := e.reader(Config{MemBytes: 64 << 20, ReadaheadBudget: 16 << 20})
	for range 3 {
		m := e.member(16 * BlockSize)
		readAt(t, r, m, e.data[m.Digest], 0, 4096)
	}
	waitFor(t, func() bool { return r.Stats().ReadaheadBytes > 0 && aheadLanded(r) })
	before := r.Stats()
	t.Logf("after 3 header reads: budget holds %d of %d MiB", before.ReadaheadBytes>>20, before.ReadaheadBudget>>20)
	m := e.member(64 * BlockSize)
	start := time.Now()
	e.readAll(r, m, BlockSize)
	took := time.Since(start)
	after := r.Stats()
	t.Logf("sequential 64 MiB reader: %v, readahead flights %d, skipped %d times, window max %d MiB",
		took, after.Readaheads-before.Readaheads, after.ReadaheadSkipped-before.ReadaheadSkipped, after.ReadaheadWindowMax>>20)
	if after.Readaheads == before.Readaheads {
		t.Errorf("the sequential reader got no readahead: the header reads' unread blocks hold the budget for %v", staleAfter)
	}
}

// TestReadaheadUnalignedReadsFetchOnce: a reader whose reads do not line
// up with blocks (1 MiB reads from 256 KiB on) reads each block's head,
// then its tail a moment later. A block read ahead must stay until its
// tail is read: released at its first read, only the memory tier could
// keep it, and the front keeps the last 48 MiB loaded (frontRuns runs)
// while readahead has loaded up to ReadaheadMax since: 64 MiB here, more
// than the front and less than the default, so that 120 blocks show it.
func TestReadaheadUnalignedReadsFetchOnce(t *testing.T) {
	for _, mem := range []int64{0, 256 << 20} {
		e := newEnv(t)
		e.store.Quiet = true
		r := e.reader(Config{MemBytes: mem, ReadaheadMax: 64 << 20})
		if front := int64(frontRuns*r.cfg.SpanBlocks) * BlockSize; front >= r.cfg.ReadaheadMax {
			t.Fatalf("the front holds %d MiB: ReadaheadMax %d MiB no longer reaches past it", front>>20, r.cfg.ReadaheadMax>>20)
		}
		const nb = 120
		m := e.member(nb * BlockSize)
		p := make([]byte, BlockSize)
		ctx := context.Background()
		if _, err := r.ReadAt(ctx, m, p[:BlockSize/4], 0); err != nil {
			t.Fatal(err)
		}
		for off := int64(BlockSize / 4); off < m.Size; off += BlockSize {
			if _, err := r.ReadAt(ctx, m, p, off); err != nil && off+BlockSize <= m.Size {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return aheadLanded(r) }) // a reader slower than the store
		}
		st := r.Stats()
		t.Logf("MemBytes %d MiB: %d blocks fetched for %d (%d requests), mem hits %d", mem>>20, st.NetworkFetches, nb, st.Requests, st.MemHits)
		if st.NetworkFetches > nb {
			t.Errorf("MemBytes %d MiB: %d blocks fetched for %d: blocks read ahead were fetched again", mem>>20, st.NetworkFetches, nb)
		}
	}
}

// aheadLanded reports whether every block the readahead budget holds has
// finished loading: what a reader slower than the store finds at its next
// read.
func aheadLanded(r *Reader) bool {
	r.budget.mu.Lock()
	defer r.budget.mu.Unlock()
	for _, h := range r.budget.held {
		if !isDone(h.c) {
			return false
		}
	}
	return true
}
