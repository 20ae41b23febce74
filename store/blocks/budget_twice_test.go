package blocks

import (
	"testing"

	"github.com/pinfs/pinfs/store/pool/pooltest"

	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/verify/b3"
)

// k0 is the stream of the budget tests' blocks (cache.Key's zero digest).
var k0 b3.Sum

// TestBudgetHoldTwiceGivesBack: a block held again by a newer call (its
// first load failed, a later run asks for it again) gives the older
// call's share back, so that the budget holds the block once; once the
// block is read, nothing stays reserved. Without that, every block whose
// load failed and was asked for again would shrink the readahead budget
// for good.
func TestBudgetHoldTwiceGivesBack(t *testing.T) {
	const n = BlockSize
	p := pooltest.New(t, 1)
	b := newBudget(4 * n)
	k := cache.Key{Index: 3}
	if !b.take(k0, n) {
		t.Fatal("take of one block from an empty budget refused")
	}
	holdFailed(b, k, n)
	if !b.take(k0, n) {
		t.Fatal("take of a second block refused")
	}
	holdLoaded(t, b, p, k, n, string(make([]byte, n)), false)
	if got := b.bytes(); got != n {
		t.Fatalf("a block held twice: %d bytes reserved, want %d (one block's)", got, n)
	}
	if !b.release(k) {
		t.Fatal("release of the held block: not held")
	}
	if got := b.bytes(); got != 0 {
		t.Fatalf("after the block was read: %d bytes reserved, want 0", got)
	}
	// The whole budget is usable again: four blocks fit.
	for i := range 4 {
		if !b.take(k0, n) {
			t.Fatalf("take %d of 4 blocks refused: the budget leaked", i+1)
		}
	}
}
