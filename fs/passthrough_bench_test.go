package fs

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkMountedPassthrough reads one 512 MiB member from a fresh
// mount with 1 MiB reads: served by passthrough from a backing file in
// the page cache, served through ReadAt from memory, and the backing
// file read directly, in turns within each iteration. It reports MB/s of
// each and this process's CPU time (daemon and reader) per GB.
func BenchmarkMountedPassthrough(b *testing.B) {
	const size = 512 << 20
	snap, data := snapshot(b, []spec{{path: "big.bin", size: size}})
	r := newBackReader(b, data, 0)
	backing := filepath.Join(r.dir, "0")
	read := func(p string) (time.Duration, time.Duration) {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		t0, c0 := time.Now(), cpuTime()
		n, err := io.CopyBuffer(io.Discard, f, make([]byte, 1<<20))
		if err != nil || n != size {
			b.Fatalf("%s: %d bytes, %v", p, n, err)
		}
		return time.Since(t0), cpuTime() - c0
	}
	read(backing) // into the page cache
	kinds := []string{"passthrough", "daemon", "direct"}
	wall := make([]time.Duration, len(kinds))
	cpu := make([]time.Duration, len(kinds))
	for b.Loop() {
		for k, kind := range kinds {
			b.StopTimer()
			p, unmount := backing, func() {}
			if kind != "direct" {
				opts := testOptions()
				if kind == "passthrough" {
					opts.Passthrough = &Passthrough{}
				}
				dir, srv, um := mountPassthrough(b, NewRoot(snap, r, opts))
				if kind == "passthrough" {
					probeOn(b, opts.Passthrough, srv)
				}
				p, unmount = filepath.Join(dir, "big.bin"), um
			}
			b.StartTimer()
			w, c := read(p)
			wall[k] += w
			cpu[k] += c
			b.StopTimer()
			unmount()
			b.StartTimer()
		}
	}
	for k, kind := range kinds {
		b.ReportMetric(float64(size)*float64(b.N)/wall[k].Seconds()/1e6, kind+"-MB/s")
		b.ReportMetric(cpu[k].Seconds()/(float64(size)*float64(b.N)/1e9), kind+"-cpu-s/GB")
	}
}
