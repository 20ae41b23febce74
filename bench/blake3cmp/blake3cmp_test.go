package blake3cmp

import (
	"fmt"
	"math/rand/v2"
	"testing"

	zeebo "github.com/zeebo/blake3"
	luke "lukechampine.com/blake3"
	"lukechampine.com/blake3/bao"
)

// groupLog is the Bao chunk-group size pinfs uses (2^6 chunks = 64 KiB).
const groupLog = 6

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{1}).Read(b)
	return b
}

func name(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

var sizes = []int{4 << 10, 64 << 10, 1 << 20, 16 << 20}

// TestSameDigest checks that both libraries, and the Bao root, agree, so
// the benchmark compares equal work.
func TestSameDigest(t *testing.T) {
	for _, n := range []int{0, 1, 1023, 1024, 1025, 64 << 10, 64<<10 + 1, 1<<20 + 7} {
		data := randomBytes(n)
		l, z := luke.Sum256(data), zeebo.Sum256(data)
		if l != z {
			t.Fatalf("len %d: lukechampine %x, zeebo %x", n, l, z)
		}
		ob, root := bao.EncodeBuf(data, groupLog, true)
		if root != l || !bao.VerifyBuf(data, ob, groupLog, root) {
			t.Fatalf("len %d: bao root %x, sum %x", n, root, l)
		}
	}
}

func BenchmarkSum256(b *testing.B) {
	for _, n := range sizes {
		data := randomBytes(n)
		b.Run("lukechampine/"+name(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				luke.Sum256(data)
			}
		})
		b.Run("zeebo/"+name(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				zeebo.Sum256(data)
			}
		})
	}
}

// BenchmarkVerifyChunk verifies 1 MiB blocks of a 16 MiB member against its
// root with a group-6 outboard, as the pinfs read path does.
func BenchmarkVerifyChunk(b *testing.B) {
	const size, block = 16 << 20, 1 << 20
	data := randomBytes(size)
	ob, root := bao.EncodeBuf(data, groupLog, true)
	b.SetBytes(block)
	i := 0
	for b.Loop() {
		off := (i % (size / block)) * block
		if !bao.VerifyChunk(data[off:off+block], ob, groupLog, uint64(off), root) {
			b.Fatal("verification failed")
		}
		i++
	}
}
