package blocks

import (
	"bytes"
	"context"
	"runtime"
	"testing"
)

// TestCutRunServesOnlyWholeBlocks fills freed memory with a pattern (for
// a receive buffer that is not cleared, should one ever be), cuts a
// request for a run of blocks off in the middle of its second block, and
// checks that only the blocks delivered whole are served and cached, that
// nothing failed verification (a block verified before all its bytes
// arrived would: the pattern is not the member's), and that the block cut
// off is in no tier; a new Reader then reads the member whole and right.
func TestCutRunServesOnlyWholeBlocks(t *testing.T) {
	e, disk := envDisk(t)
	m := e.member(3*BlockSize + 4096)
	src := e.data[m.Digest]
	// Every request that reaches past the middle of block 2 ends there.
	cut := int64(2*BlockSize + BlockSize/2)
	e.store.Faults = func(q request, seen int) fault {
		if q.Off <= cut && q.Off+q.N > cut {
			return fault{Short: true, Cut: int(cut - q.Off)}
		}
		return fault{}
	}
	r := e.reader(Config{Disk: disk, Attempts: 1, ReadaheadMax: 2 * BlockSize, SpanBlocks: 4})

	// Freed memory full of a pattern, for the flight's buffers to reuse.
	for range 3 {
		junk := make([][]byte, 16)
		for i := range junk {
			junk[i] = bytes.Repeat([]byte{0xa5}, BlockSize)
		}
		junk = nil
		runtime.GC()
	}
	// Block 0 alone (one request), which starts readahead over blocks 1-3
	// (one request, cut in block 2), then the rest.
	ctx := context.Background()
	p := make([]byte, m.Size)
	if _, err := r.ReadAt(ctx, m, p[:BlockSize], 0); err != nil {
		t.Fatal(err)
	}
	n, err := r.ReadAt(ctx, m, p[BlockSize:], BlockSize)
	if err == nil || n != BlockSize || !bytes.Equal(p[BlockSize:2*BlockSize], src[BlockSize:2*BlockSize]) {
		t.Fatalf("read %d bytes (%v); want block 1, the member's bytes, then the failure of block 2", n, err)
	}
	run := false
	for _, q := range e.store.requests() {
		run = run || q.Off == BlockSize && q.N == m.Size-BlockSize
	}
	if !run {
		t.Fatalf("requests %+v: none is one run over blocks 1-3", e.store.requests())
	}
	for _, ev := range e.rec.all() {
		if ev.Kind == KindMismatch {
			t.Fatalf("a block failed verification: its bytes were checked before they all arrived: %v", ev.Err)
		}
	}
	r.mem.Wait()
	disk.Flush()
	if _, ok := r.memBlock(m, 2); ok {
		t.Fatal("block 2, never delivered whole, is in the memory tier")
	}
	if _, ok := disk.Get(key(m, 2), m.Size); ok {
		t.Fatal("block 2, never delivered whole, is in the disk tier")
	}
	e.store.Faults = nil
	e.readAll(e.reader(Config{Disk: disk}), m, 256<<10)
}
