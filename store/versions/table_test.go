package versions

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	tb := NewTable()
	a := entry("k", "v1", 10)
	tb.Add(a, entry("k", "v2", 20), entry("k/", "v1", 30))
	later := a
	later.Size = 99
	tb.Add(later) // the last entry of a version is kept
	if tb.Len() != 3 {
		t.Fatalf("Len = %d, want 3", tb.Len())
	}
	if got, ok := tb.Lookup("k", "v1"); !ok || got != later {
		t.Fatalf("Lookup(k, v1) = %+v, %v; want %+v", got, ok, later)
	}
	for _, kv := range [][2]string{{"k", "v3"}, {"kv", "1"}, {"", "kv1"}, {"k/", "v2"}, {"K", "v1"}} {
		if got, ok := tb.Lookup(kv[0], kv[1]); ok {
			t.Errorf("Lookup(%q, %q) = %+v, want none", kv[0], kv[1], got)
		}
	}
	var zero Table
	if _, ok := zero.Lookup("k", "v1"); ok || zero.Len() != 0 {
		t.Fatal("zero Table is not empty")
	}
	zero.Add(a)
	if _, ok := zero.Lookup("k", "v1"); !ok {
		t.Fatal("zero Table: Add lost the entry")
	}
}

// TestTableMany adds enough entries to grow the index and the chunks many
// times, with pairs that differ only in where the key ends.
func TestTableMany(t *testing.T) {
	tb := NewTable()
	const n = 20000
	for i := range n {
		tb.Add(entry(fmt.Sprintf("k%d", i), "v", int64(i)), entry(fmt.Sprintf("k%dv", i), "", int64(-i)))
	}
	tb.Add(entry(strings.Repeat("k", maxKey+1), "v", 1), entry("k", strings.Repeat("v", maxVersion+1), 1))
	if tb.Len() != 2*n {
		t.Fatalf("Len = %d, want %d", tb.Len(), 2*n)
	}
	for i := range n {
		k := fmt.Sprintf("k%d", i)
		if e, ok := tb.Lookup(k, "v"); !ok || e != entry(k, "v", int64(i)) {
			t.Fatalf("Lookup(%s, v) = %+v, %v", k, e, ok)
		}
		if e, ok := tb.Lookup(k+"v", ""); !ok || e.Size != int64(-i) {
			t.Fatalf("Lookup(%sv, \"\") = %+v, %v", k, e, ok)
		}
		if _, ok := tb.Lookup(k, "w"); ok {
			t.Fatalf("Lookup(%s, w) found an entry", k)
		}
	}
}

// BenchmarkTable1M builds a table of a million entries with keys and
// version ids of typical lengths (36 and 32 bytes) and reports the heap it
// holds per entry.
func BenchmarkTable1M(b *testing.B) {
	const n = 1 << 20
	es := make([]Entry, n)
	for i := range es {
		es[i] = entry(fmt.Sprintf("data/part-%05d/file-%07d.parquet", i/1000, i), fmt.Sprintf("%032x", i*7919), int64(i))
	}
	b.ResetTimer()
	var perEntry float64
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		tb := NewTable()
		tb.Add(es...)
		runtime.GC()
		runtime.ReadMemStats(&after)
		if tb.Len() != n {
			b.Fatalf("Len = %d", tb.Len())
		}
		perEntry = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(tb)
	}
	b.ReportMetric(perEntry, "bytes/entry")
}
