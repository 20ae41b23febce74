// Package pooltest gives tests a pool that checks, when the test ends,
// that every slot came back.
package pooltest

import (
	"testing"

	"github.com/pinfs/pinfs/store/pool"
)

// New returns a pool of n slots for t. At cleanup (registered now, so it
// runs after the cleanups t registers later, such as closing the tiers
// and Readers that use it) it fails t unless every slot is free: nothing
// the test released, closed or flushed kept a reference.
func New(t testing.TB, n int) *pool.Pool {
	t.Helper()
	p, err := pool.New(int64(n) * pool.SlotSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if st := p.Stats(); st.Free != st.Slots {
			t.Errorf("%d of %d slots still held at the end: %v", st.Slots-st.Free, st.Slots, st.InUse)
		}
	})
	return p
}
