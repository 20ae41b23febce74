package fs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// bigN is the member count of the large-snapshot benchmarks.
const bigN = 1_000_000

var (
	bigOnce sync.Once
	bigSnap *verify.Snapshot
)

// bigSnapshot returns a verified synthetic snapshot of bigN S3 members in
// 1,000 directories, made once per test binary.
func bigSnapshot(tb testing.TB) *verify.Snapshot {
	tb.Helper()
	bigOnce.Do(func() {
		d, mb, table := verifytest.Table(bigN, verifytest.S3, 1)
		c, err := verify.Check(d, mb, table)
		if err != nil {
			tb.Fatal(err)
		}
		if bigSnap, err = c.Snapshot(); err != nil {
			tb.Fatal(err)
		}
	})
	if bigSnap == nil {
		tb.Fatal("no big snapshot")
	}
	return bigSnap
}

// liveHeap returns the heap in use after a full collection.
func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// rss returns the process's resident set size in bytes.
func rss() uint64 {
	b, _ := os.ReadFile("/proc/self/status")
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb uint64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkBuildTree1M builds the tree of a 1M-member snapshot and
// reports the time and the heap the tree keeps per member.
func BenchmarkBuildTree1M(b *testing.B) {
	snap := bigSnapshot(b)
	for b.Loop() {
		before := liveHeap()
		start := time.Now()
		root := build(b, snap, &memReader{}, testOptions())
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "build-ms")
		b.ReportMetric(float64(int64(liveHeap())-int64(before))/bigN, "heapB/member")
		runtime.KeepAlive(root)
	}
}

// BenchmarkFind1M mounts a 1M-member snapshot for real and lists it with
// find(1), as `make bench` does, reporting the time to mount, the time of
// the listing and the heap and RSS of this process afterwards.
func BenchmarkFind1M(b *testing.B) {
	requireFUSE(b)
	snap := bigSnapshot(b)
	debug.FreeOSMemory()
	for b.Loop() {
		base := liveHeap()
		start := time.Now()
		dir, unmount := mount(b, NewRoot(snap, &memReader{}, testOptions()), MountOptions{})
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "mount-ms")
		start = time.Now()
		out, err := exec.Command("find", dir, "-type", "f").Output()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "find-ms")
		if n := bytes.Count(out, []byte{'\n'}); n != bigN {
			b.Fatalf("find listed %d files, want %d", n, bigN)
		}
		out = nil
		b.ReportMetric(float64(int64(liveHeap())-int64(base))/bigN, "fuseHeapB/member")
		b.ReportMetric(float64(liveHeap())/(1<<20), "heapMB")
		b.ReportMetric(float64(rss())/(1<<20), "rssMB")
		unmount()
	}
}
