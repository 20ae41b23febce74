package blocks

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// BenchmarkBacking256MiB is the open-time verification of a 256 MiB
// member file (in the page cache: the file was just written), with one
// worker and with one per core, the whole first Backing of a mount
// (checks, outboard from the Reader's cache, verification, stamp), and
// the first Backing of a later mount (checks, durable stamp).
func BenchmarkBacking256MiB(b *testing.B) {
	const size = 256 << 20
	e := newEnv(b)
	d := diskDir(b, b.TempDir()+"/cache", 1<<40)
	b.Cleanup(func() { d.Close() })
	r := e.reader(Config{Disk: d})
	m := e.member(size)
	p := d.MemberPath(m.Digest)
	if err := os.MkdirAll(p[:len(p)-65], 0o700); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(p, e.data[m.Digest], 0o400); err != nil {
		b.Fatal(err)
	}
	ob := e.obs.obs[m.Digest]
	f, err := os.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for _, w := range []int{1, verifyWorkers()} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			b.SetBytes(size)
			cpu0, _ := cpuTime()
			for b.Loop() {
				if err := r.verifyFile(context.Background(), f, m, ob, w); err != nil {
					b.Fatal(err)
				}
			}
			cpu1, _ := cpuTime()
			b.ReportMetric(float64(b.N)*size/1e9/b.Elapsed().Seconds(), "GB/s")
			b.ReportMetric((cpu1-cpu0).Seconds()/(float64(b.N)*size/1e9), "cpu-s/GB")
		})
	}
	b.Run("Backing", func(b *testing.B) {
		b.SetBytes(size)
		cpu0, _ := cpuTime()
		for b.Loop() {
			r.stamps.Clear() // as in a new mount of a file no mount verified
			r.unstamp(m)
			g, err := r.Backing(context.Background(), m)
			if err != nil {
				b.Fatal(err)
			}
			g.Close()
		}
		cpu1, _ := cpuTime()
		b.ReportMetric(float64(b.N)*size/1e9/b.Elapsed().Seconds(), "GB/s")
		b.ReportMetric((cpu1-cpu0).Seconds()/(float64(b.N)*size/1e9), "cpu-s/GB")
	})
	b.Run("Remount", func(b *testing.B) {
		g, err := r.Backing(context.Background(), m)
		if err != nil {
			b.Fatal(err)
		}
		g.Close()
		if _, ok := (&backingEnv{disk: d}).durableOf(m); !ok {
			b.Skip("no durable stamp: the cache dir's file system keeps none here")
		}
		v0 := r.Stats().PassthroughVerified
		for b.Loop() {
			r.stamps.Clear() // as in a new mount; the durable stamp stays
			g, err := r.Backing(context.Background(), m)
			if err != nil {
				b.Fatal(err)
			}
			g.Close()
		}
		if v := r.Stats().PassthroughVerified - v0; v != 0 {
			b.Fatalf("%d verifications in later mounts", v)
		}
	})
}
