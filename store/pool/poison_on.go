//go:build pooldebug

package pool

import (
	"bytes"
	"fmt"
)

// Debug reports whether the pool poisons released slots (the pooldebug
// build tag).
const Debug = true

// poisonByte fills a released slot.
const poisonByte = 0xDB

// poisonSlab is a slot's worth of poison: copied in and compared with
// whole, so that a race build checks ranges, not a million bytes one by
// one.
var poisonSlab = bytes.Repeat([]byte{poisonByte}, SlotSize)

// poison fills a released slot's bytes.
func poison(b []byte) { copy(b, poisonSlab) }

// checkPoison panics unless a slot about to be handed out again still
// holds nothing but poison: a write after its release went through a
// stale slice.
func checkPoison(b []byte, slot int) {
	if bytes.Equal(b, poisonSlab[:len(b)]) {
		return
	}
	i := 0
	for i < len(b) && b[i] == poisonByte {
		i++
	}
	panic(fmt.Sprintf("pool: slot %d written after its release (byte %d is %#x)", slot, i, b[i]))
}
