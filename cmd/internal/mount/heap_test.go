package mount

import (
	"runtime"
	"testing"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/fs"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/verifytest"
)

func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// BenchmarkDaemonHeap1M reports what a mount of 1M S3 members keeps
// before the kernel looks anything up: the checked snapshot, the run
// record's tracker and the tree, per member.
func BenchmarkDaemonHeap1M(b *testing.B) {
	const n = 1_000_000
	d, mb, table := verifytest.Table(n, verifytest.S3, 1)
	for b.Loop() {
		base := liveHeap()
		start := time.Now()
		c, err := verify.Check(d, mb, table)
		if err != nil {
			b.Fatal(err)
		}
		snap, err := c.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		c = nil
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "check-ms")
		h1 := liveHeap()
		tracker := consumed.NewTracker(snap.Table())
		h2 := liveHeap()
		start = time.Now()
		root := fs.NewRoot(snap, &files{members: snap.Table(), tracker: tracker}, fs.Options{})
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "tree-ms")
		h3 := liveHeap()
		b.ReportMetric(float64(h1-base)/n, "snapshotB/member")
		b.ReportMetric(float64(h2-h1)/n, "trackerB/member")
		b.ReportMetric(float64(h3-h2)/n, "treeB/member")
		b.ReportMetric(float64(h3-base)/n, "totalB/member")
		runtime.KeepAlive(root)
	}
}
