package cache

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The disk benchmarks report "cpu-us/op", the process's CPU time per block
// (all goroutines, the writer's too), besides ns/op:
//
//	go test -run '^$' -bench Disk -count 3 ./store/cache/

// BenchmarkDiskPut writes distinct 1 MiB blocks into a tier with room for
// a few of them, so that most Puts also evict: with the shared accounting,
// every Put updates the directory's totals under its lock, and one Put in
// budget/8 lists the directory to evict. The time includes the Flush that
// puts the last block on disk, and one Flush every 32 blocks, so that a
// write-behind queue drops none (dropped/op stays 0).
func BenchmarkDiskPut(b *testing.B) {
	for _, blocks := range []int64{64, 256} {
		b.Run(fmt.Sprintf("budget=%dMiB", blocks), func(b *testing.B) {
			d := openDisk(b, b.TempDir(), blocks*BlockSize)
			data := make([]byte, BlockSize)
			b.SetBytes(BlockSize)
			defer reportCPU(b)()
			for i := 0; b.Loop(); i++ {
				if err := d.Put(key(i, 0), int64(len(data)), data); err != nil {
					b.Fatal(err)
				}
				if i%32 == 31 {
					d.Flush() // a write-behind queue writes them all, drops none
				}
			}
			d.Flush()
			b.ReportMetric(float64(d.Stats().Dropped)/float64(b.N), "dropped/op")
		})
	}
}

// BenchmarkDiskPutSmall writes distinct 256 KiB blocks (the one block of
// a small member) into a tier with room for all of them, in small
// batches, as 16 readers of small files do: the cost per file of the disk
// tier's write path, without eviction.
func BenchmarkDiskPutSmall(b *testing.B) {
	const size = 256 << 10
	d := openDisk(b, b.TempDir(), 1<<40)
	data := make([]byte, size)
	b.SetBytes(size)
	defer reportCPU(b)()
	for i := 0; b.Loop(); i++ {
		if err := d.Put(key(i, 0), int64(len(data)), data); err != nil {
			b.Fatal(err)
		}
		if i%4 == 3 {
			d.Flush()
		}
	}
	d.Flush()
}

// BenchmarkDiskGet reads 1 MiB blocks back from the tier (page cache), as
// a remount on a warm cache directory does.
func BenchmarkDiskGet(b *testing.B) {
	const blocks = 32
	d := openDisk(b, b.TempDir(), 64*BlockSize)
	data := make([]byte, BlockSize)
	for i := range blocks {
		if err := d.Put(key(i, 0), int64(len(data)), data); err != nil {
			b.Fatal(err)
		}
	}
	d.Flush()
	b.SetBytes(BlockSize)
	defer reportCPU(b)()
	for i := 0; b.Loop(); i++ {
		if _, ok := d.Get(key(i%blocks, 0), BlockSize); !ok {
			b.Fatal("miss")
		}
	}
}

// BenchmarkDiskHasMiss is the cost of asking for a block the tier does not
// hold, which the block reader does while planning a span.
func BenchmarkDiskHasMiss(b *testing.B) {
	d := openDisk(b, b.TempDir(), 64*BlockSize)
	for i := 0; b.Loop(); i++ {
		if d.Has(key(i, 0), BlockSize) {
			b.Fatal("hit")
		}
	}
}

// reportCPU starts counting the process's CPU time; the function it
// returns reports it per op as "cpu-us/op".
func reportCPU(b *testing.B) func() {
	start := processCPU()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(processCPU()-start)/1e3/float64(b.N), "cpu-us/op")
		}
	}
}

// processCPU is the CPU time, user and system, the process has used.
func processCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
