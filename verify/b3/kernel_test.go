package b3

import (
	"math/rand/v2"
	"testing"

	"lukechampine.com/blake3/guts"
)

// BenchmarkKernel hashes 16 KiB pieces of a 16 MiB buffer with the SIMD
// kernel, reading them in place or after a copy into a scratch buffer (what
// node does), to keep the choice in node measured.
func BenchmarkKernel(b *testing.B) {
	data := make([]byte, 16<<20)
	rand.NewChaCha8([32]byte{1}).Read(data)
	pieces := len(data) / simdBytes
	b.Run("inplace", func(b *testing.B) {
		b.SetBytes(simdBytes)
		for i := 0; b.Loop(); i++ {
			p := data[i%pieces*simdBytes:][:simdBytes]
			guts.CompressBuffer((*[simdBytes]byte)(p), simdBytes, &guts.IV, 0, 0)
		}
	})
	b.Run("copied", func(b *testing.B) {
		var buf [simdBytes]byte
		b.SetBytes(simdBytes)
		for i := 0; b.Loop(); i++ {
			copy(buf[:], data[i%pieces*simdBytes:][:simdBytes])
			guts.CompressBuffer(&buf, simdBytes, &guts.IV, 0, 0)
		}
	})
}
