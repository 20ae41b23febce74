package verify_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// bigN is the member count of the large-table benchmarks.
const bigN = 1_000_000

type bigTable struct {
	d               verify.Digest
	manifest, table []byte
}

var bigTables = map[verifytest.Kind]*bigTable{}
var bigMu sync.Mutex

// big returns the synthetic 1M-member table of kind k, made once.
func big(tb testing.TB, k verifytest.Kind) *bigTable {
	tb.Helper()
	bigMu.Lock()
	defer bigMu.Unlock()
	if t := bigTables[k]; t != nil {
		return t
	}
	t := &bigTable{}
	t.d, t.manifest, t.table = verifytest.Table(bigN, k, 1)
	bigTables[k] = t
	return t
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkCheck1M checks a 1M-member table (manifest, table digest,
// parse, member checks) and reports the heap the result keeps, the table
// bytes not counted.
func BenchmarkCheck1M(b *testing.B) {
	for _, k := range []struct {
		name string
		kind verifytest.Kind
	}{{"s3", verifytest.S3}, {"cas", verifytest.CAS}} {
		b.Run(k.name, func(b *testing.B) {
			t := big(b, k.kind)
			b.SetBytes(int64(len(t.table)))
			b.ReportAllocs()
			for b.Loop() {
				before := heapInUse()
				c, err := verify.Check(t.d, t.manifest, t.table)
				if err != nil {
					b.Fatal(err)
				}
				s, err := c.Snapshot()
				if err != nil {
					b.Fatal(err)
				}
				c = nil
				after := heapInUse()
				b.ReportMetric(float64(int64(after)-int64(before))/bigN, "heapB/member")
				b.ReportMetric(float64(len(t.table))/bigN, "tableB/member")
				runtime.KeepAlive(s)
			}
		})
	}
}

// BenchmarkParseTable1M parses a 1M-member table without the digest and
// member checks.
func BenchmarkParseTable1M(b *testing.B) {
	t := big(b, verifytest.S3)
	b.SetBytes(int64(len(t.table)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := verify.ParseTable(t.table); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTableCheck1M runs the member checks of a parsed 1M-member table.
func BenchmarkTableCheck1M(b *testing.B) {
	tab, err := verify.ParseTable(big(b, verifytest.S3).table)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if ps := tab.Check(); len(ps) != 0 {
			b.Fatal(ps[0])
		}
	}
}
