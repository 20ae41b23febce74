package verify

import (
	"sync/atomic"
	"testing"
)

// TestNeedChunkBoundaries: a range is served only when every chunk it
// touches matches, the short last chunk included, and a chunk that
// failed stays refused.
func TestNeedChunkBoundaries(t *testing.T) {
	t.Parallel()
	const size = 1<<chunkShift + 10
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i * 7)
	}
	var h chunkHasher
	h.write(b)
	l := &layout{}
	l.b[secNames], l.sums[secNames] = b, h.finish()
	l.done[secNames] = make([]atomic.Uint64, 1)
	if len(l.sums[secNames]) != 2 {
		t.Fatalf("%d chunk digests, want 2", len(l.sums[secNames]))
	}
	b[size-1] ^= 1 // in the short last chunk
	for _, c := range []struct {
		off, n int
		ok     bool
	}{
		{0, 100, true}, {1<<chunkShift - 1, 1, true}, {1<<chunkShift - 5, 10, false},
		{1 << chunkShift, 1, false}, {size - 1, 1, false}, {0, size, false}, {5, 0, true},
	} {
		if got := l.need(secNames, c.off, c.n); got != c.ok {
			t.Errorf("need(%d, %d) = %v, want %v", c.off, c.n, got, c.ok)
		}
	}
}
