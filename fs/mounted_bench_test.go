package fs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// cpuTime is this process's user+system CPU time: the FUSE server's and
// the readers' system calls both.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkMountedSmallFiles reads 2000 members of 256 KiB from a fresh
// mount (nothing in the kernel's caches) with 16 readers, as the small
// files row of make bench does, with the bytes served from memory: what
// is measured is the FUSE cost per file (requests, replies), for a plain
// Reader (ReadAt, data replies) and a SliceReader (vector replies), in
// turns within each iteration. It reports wall time per pass and this
// process's CPU time (daemon and readers) per file.
func BenchmarkMountedSmallFiles(b *testing.B) {
	const n, size, readers = 2000, 256 << 10, 16
	specs := make([]spec, n)
	for i := range specs {
		specs[i] = spec{path: fmt.Sprintf("d%02d/f%05d.bin", i%20, i), size: size}
	}
	snap, data := snapshot(b, specs)
	ms := snap.Members()
	kinds := []struct {
		name string
		r    Reader
	}{{"data", &memReader{data: data}}, {"slices", &sliceReader{memReader: &memReader{data: data}, cut: 64 << 10}}}
	wall := make([]time.Duration, len(kinds))
	cpu := make([]time.Duration, len(kinds))
	for b.Loop() {
		for k, kind := range kinds {
			b.StopTimer()
			dir, unmount := mount(b, NewRoot(snap, kind.r, testOptions()), MountOptions{})
			b.StartTimer()
			t0, c0 := time.Now(), cpuTime()
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, readers)
			for range readers {
				wg.Go(func() {
					buf := make([]byte, size+4096)
					for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
						f, err := os.Open(filepath.Join(dir, ms[i].Path))
						if err != nil {
							errs <- err
							return
						}
						k, err := f.Read(buf)
						f.Close()
						if err != nil || !bytes.Equal(buf[:k], data[i]) {
							errs <- fmt.Errorf("%s: %d bytes, %v", ms[i].Path, k, err)
							return
						}
					}
				})
			}
			wg.Wait()
			wall[k] += time.Since(t0)
			cpu[k] += cpuTime() - c0
			b.StopTimer()
			unmount()
			b.StartTimer()
			close(errs)
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
	}
	for k, kind := range kinds {
		b.ReportMetric(float64(wall[k].Microseconds())/1e3/float64(b.N), kind.name+"-ms")
		b.ReportMetric(float64(cpu[k].Microseconds())/float64(b.N)/n, kind.name+"-cpu-µs/file")
	}
}
