package mount

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
)

// restoreMemoryLimit puts back the runtime's memory limit of before the
// test.
func restoreMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
}

// memoryLimitLog runs limitMemory and returns its log line's fields.
func memoryLimitLog(t *testing.T, cacheMem, readahead int64, members int) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	limitMemory(cacheMem, readahead, members, slog.New(slog.NewJSONHandler(&buf, nil)))
	if buf.Len() == 0 {
		return nil
	}
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log %q: %v", buf.Bytes(), err)
	}
	return line
}

func TestLimitMemory(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "") // unset for limitMemory
	for _, tc := range []struct {
		name                string
		cacheMem, readahead int64
		members             int
	}{
		{"memory tier, readahead and members", 256 << 20, 512 << 20, 1_000_000},
		{"no memory tier", 0, 48 << 20, 7},
		{"negative budgets count as none", -1, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			restoreMemoryLimit(t)
			debug.SetMemoryLimit(math.MaxInt64)
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)

			line := memoryLimitLog(t, tc.cacheMem, tc.readahead, tc.members)
			got := debug.SetMemoryLimit(-1)

			heap := int64(line["snapshot_heap"].(float64))
			if heap <= 0 || heap > 2*int64(before.HeapAlloc)+(16<<20) {
				t.Errorf("snapshot_heap %d, heap before the call %d", heap, before.HeapAlloc)
			}
			want := heap + max(tc.cacheMem, 0) + max(tc.readahead, 0) + int64(tc.members)*nodeBytes + memoryHeadroom
			if got != want {
				t.Errorf("memory limit %d, want heap %d + cache-mem %d + readahead %d + %d members × %d + headroom %d = %d",
					got, heap, tc.cacheMem, tc.readahead, tc.members, nodeBytes, memoryHeadroom, want)
			}
			if logged := int64(line["bytes"].(float64)); logged != got {
				t.Errorf("logged limit %d, set %d", logged, got)
			}
		})
	}
}

func TestLimitMemoryGOMEMLIMITWins(t *testing.T) {
	restoreMemoryLimit(t)
	t.Setenv("GOMEMLIMIT", "3GiB")
	const set = 3 << 30 // what the runtime would have read from GOMEMLIMIT at start
	debug.SetMemoryLimit(set)
	if line := memoryLimitLog(t, 256<<20, 512<<20, 1000); line != nil {
		t.Errorf("limitMemory logged %v with GOMEMLIMIT set", line)
	}
	if got := debug.SetMemoryLimit(-1); got != set {
		t.Errorf("memory limit %d with GOMEMLIMIT set, want it left at %d", got, set)
	}
}
