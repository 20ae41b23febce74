package blocks

import (
	"context"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store/pool/pooltest"
)

// A pool filled by blocks read ahead for a reader that went away does not
// starve another reader: its load, finding no free slot, asks the Reader
// for the slots it can do without, and the blocks left unread give
// theirs back. Without that, nothing would free a slot and the read would
// fail at its timeout.
func TestShortPoolGivesBackReadahead(t *testing.T) {
	e := newEnv(t)
	p := pooltest.New(t, 24)
	r := e.reader(Config{Pool: p, MemBytes: 4 * BlockSize, ReadaheadMax: 16 * BlockSize,
		ReadaheadBudget: 16 * BlockSize, SpanBlocks: 4, ReadTimeout: 20 * time.Second})
	left := e.member(40 * BlockSize)
	// A sequential reader opens its window, then stops: its readahead
	// holds slots it will never give back by reading.
	for i := range int64(8) {
		readAt(t, r, left, e.data[left.Digest], i*BlockSize, BlockSize)
	}
	waitFor(t, func() bool { return r.Stats().ReadaheadBytes > 0 })
	// Hold every free slot, as replies and other flights would.
	var held []*Span
	for p.Stats().Free > 0 {
		m := e.member(BlockSize)
		sp, _, err := r.Slices(context.Background(), m, 0, BlockSize)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, sp)
	}
	r.mem.TrimFront() // (the front would give its own back too; here only the budget can)
	other := e.member(2 * BlockSize)
	start := time.Now()
	readAt(t, r, other, e.data[other.Digest], 0, BlockSize)
	t.Logf("read with a full pool took %v; pool %+v", time.Since(start), p.Stats())
	if p.Stats().Waits == 0 {
		t.Fatal("the read never waited for a slot: the pool was not full, the test proves nothing")
	}
	for _, sp := range held {
		sp.Release()
	}
}
