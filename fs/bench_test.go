package fs

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkBuildTree builds the tree of a snapshot with 100,000 members in
// 1,000 directories and reports the heap it keeps per member.
func BenchmarkBuildTree(b *testing.B) {
	const n = 100_000
	specs := make([]spec, n)
	for i := range specs {
		specs[i] = spec{path: fmt.Sprintf("train/shard-%03d/sample-%08d.jsonl", i%1000, i), size: 1}
	}
	snap, _ := snapshot(b, specs)
	var before, after runtime.MemStats
	b.ResetTimer()
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&before)
		root := build(b, snap, &memReader{}, testOptions())
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "heapB/member")
		runtime.KeepAlive(root)
	}
}
