//go:build pooldebug

package pool

import (
	"context"
	"testing"
)

// A write through a slice kept after its Block was released is caught
// at the slot's next Get.
func TestPoisonCatchesWriteAfterRelease(t *testing.T) {
	p := newPool(t, 1)
	b, _ := p.Get(context.Background(), SlotSize, Flight)
	stale := b.Bytes()
	b.Release(Flight)
	for i, c := range stale {
		if c != poisonByte {
			t.Fatalf("released slot byte %d is %#x, not poison", i, c)
		}
	}
	stale[12345] = 1
	mustPanic(t, "written after its release", func() { p.Get(context.Background(), SlotSize, Flight) })
}
