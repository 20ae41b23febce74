//go:build pooldebug

package pool

import "fmt"

// Debug reports whether the pool poisons released slots (the pooldebug
// build tag).
const Debug = true

// poisonByte fills a released slot.
const poisonByte = 0xDB

// poison fills a released slot's bytes.
func poison(b []byte) {
	for i := range b {
		b[i] = poisonByte
	}
}

// checkPoison panics unless a slot about to be handed out again still
// holds nothing but poison: a write after its release went through a
// stale slice.
func checkPoison(b []byte, slot int) {
	for i, c := range b {
		if c != poisonByte {
			panic(fmt.Sprintf("pool: slot %d written after its release (byte %d is %#x)", slot, i, c))
		}
	}
}
