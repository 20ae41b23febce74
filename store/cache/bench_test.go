package cache

import (
	"fmt"
	"testing"
)

// BenchmarkDiskPut writes distinct 1 MiB blocks into a tier with room for
// a few of them, so that most Puts also evict: with the shared accounting,
// every Put updates the directory's totals under its lock, and one Put in
// budget/8 lists the directory to evict.
func BenchmarkDiskPut(b *testing.B) {
	for _, blocks := range []int64{64, 256} {
		b.Run(fmt.Sprintf("budget=%dMiB", blocks), func(b *testing.B) {
			d := openDisk(b, b.TempDir(), blocks*BlockSize)
			data := make([]byte, BlockSize)
			b.SetBytes(BlockSize)
			for i := 0; b.Loop(); i++ {
				if err := d.Put(key(i, 0), data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDiskHasMiss is the cost of asking for a block the tier does not
// hold, which the block reader does while planning a span.
func BenchmarkDiskHasMiss(b *testing.B) {
	d := openDisk(b, b.TempDir(), 64*BlockSize)
	for i := 0; b.Loop(); i++ {
		if d.Has(key(i, 0)) {
			b.Fatal("hit")
		}
	}
}
