package bench

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// concResult is one run of the concurrency rows.
type concResult struct {
	m       measure
	gc      int   // collections during the read
	hwm     int64 // daemon VmHWM after the read
	bound   memBound
	boundOK bool // the mount logged a memory bound
}

// cpuPerGB is the daemon's CPU seconds per GB read.
func (r concResult) cpuPerGB() float64 { return r.m.daemon / (float64(r.m.bytes) / 1e9) }

// gcPerGB is the collections per GB read.
func (r concResult) gcPerGB() float64 { return float64(r.gc) / (float64(r.m.bytes) / 1e9) }

// concRun reads readers members of fx through a new mount (flags added
// to the defaults; the daemon with GODEBUG=gctrace=1) after reading
// their store files once, and returns what it cost. One reader reads
// concOneCount members one after the other.
func (b *bench) concRun(t *testing.T, fx *concFixture, name string, readers int, flags ...string) concResult {
	t.Helper()
	n := max(readers, concOneCount)
	cores, waited := waitQuiet(20 * time.Second)
	b.note("%s: %.2f cores busy outside the bench before it (waited %s for < 0.3)", name, cores, waited.Round(time.Second))
	warmFiles(t, fx.blobs[:n])
	cache := t.TempDir()
	defer os.RemoveAll(cache) // up to --cache-disk of block files per run
	m := b.mount(t, name, []string{gctraceEnv}, fx.digest, fx.store, cache, flags...)
	gc0 := gcCycles(m.fullLog())
	s0 := b.sample(m.pid)
	var cpu float64
	var err error
	if readers == 1 {
		cpu, err = ddSeq(m.dir, fx.paths[:n], concSize)
	} else {
		_, cpu, err = ddEach(m.dir, fx.paths[:n], concSize)
	}
	meas := b.done("pinfs "+name, s0, m.pid, int64(n)*concSize, cpu)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	log := m.fullLog()
	r := concResult{m: meas, gc: gcCycles(log) - gc0, hwm: procStatus(m.pid, "VmHWM")}
	r.bound, r.boundOK = memoryBound(log)
	b.finish(t, m)
	t.Logf("%s: %.3f GB/s, daemon %.2f CPU-s/GB, %d collections (%.1f/GB), VmHWM %s",
		name, meas.gbps(), r.cpuPerGB(), r.gc, r.gcPerGB(), mb(r.hwm))
	return r
}

// ddSeq reads each member of dir with one dd bs=1M after the other and
// returns the dd processes' CPU seconds; each must read size bytes.
func ddSeq(dir string, members []string, size int64) (float64, error) {
	var cpu float64
	for _, p := range members {
		r := run(10*time.Minute, nil, "dd", "if="+filepath.Join(dir, p), "of=/dev/null", "bs=1M")
		cpu += r.cpu
		if err := ddCheck(p, r, size); err != nil {
			return cpu, err
		}
	}
	return cpu, nil
}

// ddEach runs one dd bs=1M per member of dir, all at once, and returns
// the wall time from the first start to the last exit and the dd
// processes' CPU seconds; each must read size bytes.
func ddEach(dir string, members []string, size int64) (time.Duration, float64, error) {
	var wg sync.WaitGroup
	res := make([]cmdResult, len(members))
	start := time.Now()
	for i, p := range members {
		wg.Go(func() {
			res[i] = run(10*time.Minute, nil, "dd", "if="+filepath.Join(dir, p), "of=/dev/null", "bs=1M")
		})
	}
	wg.Wait()
	wall := time.Since(start)
	var cpu float64
	var first error
	for i, r := range res {
		cpu += r.cpu
		if err := ddCheck(members[i], r, size); err != nil && first == nil {
			first = err
		}
	}
	return wall, cpu, first
}

// ddCheck fails a dd that failed or read other than size bytes.
func ddCheck(member string, r cmdResult, size int64) error {
	if r.err != nil {
		return fmt.Errorf("dd %s: %v: %s", member, r.err, firstLine(r.stderr))
	}
	if n := ddBytes(r.stderr); n != size {
		return fmt.Errorf("dd %s: read %d bytes, want %d", member, n, size)
	}
	return nil
}

// b3sumFig is single-thread b3sum's CPU per GB of some store files.
type b3sumFig struct {
	perGB float64 // NaN when it did not run
	err   error
}

// cell is how a row shows it.
func (f b3sumFig) cell(files int) string {
	if f.err != nil {
		return "not run: " + f.err.Error()
	}
	return fmt.Sprintf("%.2f CPU-s/GB (`b3sum --num-threads 1`, the %d store files, page cache, best of 2)", f.perGB, files)
}

// b3sumSingle measures `b3sum --num-threads 1` of the first n members'
// store files in the page cache (best CPU of 2) and checks each digest
// it prints against the member's.
func (b *bench) b3sumSingle(t *testing.T, fx *concFixture, n int) b3sumFig {
	warmFiles(t, fx.blobs[:n])
	best := math.Inf(1)
	for range 2 {
		r := run(10*time.Minute, nil, "b3sum", append([]string{"--num-threads", "1"}, fx.blobs[:n]...)...)
		if r.err != nil {
			return b3sumFig{math.NaN(), fmt.Errorf("b3sum: %v %s", r.err, firstLine(r.stderr))}
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != n {
			return b3sumFig{math.NaN(), fmt.Errorf("b3sum printed %d lines for %d files", len(lines), n)}
		}
		for i, line := range lines {
			if got, _, _ := strings.Cut(line, " "); got != fx.hexes[i] {
				t.Errorf("b3sum of %s: %s, want the member's digest %s", fx.blobs[i], got, fx.hexes[i])
			}
		}
		best = min(best, r.cpu)
	}
	gb := float64(n) * concSize / 1e9
	b.note("concurrency: `b3sum --num-threads 1` of %d store files (%.2f GB) in the page cache: %.2f CPU s (best of 2)", n, gb, best)
	return b3sumFig{perGB: best / gb}
}
