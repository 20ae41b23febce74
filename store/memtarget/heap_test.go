package memtarget

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/pinfs/pinfs/store/storetest"
)

// TestLog: one "memory" line with the target, its source and how it is
// shared; a warning when the flags outgrow the target, another when the
// cgroup could not be read.
func TestLog(t *testing.T) {
	s, err := Split(512<<20, 150<<20)
	if err != nil {
		t.Fatal(err)
	}
	s.Source, s.Limit = SourceV2, 640<<20
	lines := storetest.LogLines(t, func(l *slog.Logger) { s.Log(l, "snapshot_heap", 5<<20) })
	if len(lines) != 1 {
		t.Fatalf("log %v, want one line", lines)
	}
	for k, v := range map[string]any{"msg": "memory", "source": SourceV2, "target": float64(s.Target), "pool": float64(s.Pool),
		"mem": float64(s.Mem), "readahead": float64(s.Readahead), "reserve": float64(s.Reserve), "heap": float64(s.Heap),
		"cgroup_limit": float64(640 << 20), "snapshot_heap": float64(5 << 20)} {
		if lines[0][k] != v {
			t.Errorf("memory line %s = %v, want %v (%v)", k, lines[0][k], v, lines[0])
		}
	}
	over := s.Override(4<<30, true, 0, false)
	over.Unread = errors.New("memory target: bad file")
	lines = storetest.LogLines(t, func(l *slog.Logger) { over.Log(l) })
	if len(lines) != 3 || lines[1]["level"] != "WARN" || lines[1]["over"] != float64(over.Over) ||
		lines[2]["level"] != "WARN" || lines[2]["err"] != "memory target: bad file" {
		t.Errorf("log %v; want the memory line, a warning of %d over and one of the unread cgroup", lines, over.Over)
	}
	if _, ok := lines[0]["cgroup_limit"]; !ok {
		t.Errorf("memory line lost the cgroup's limit: %v", lines[0])
	}
}

func TestHeapInUse(t *testing.T) {
	keep := make([]byte, 32<<20)
	if h := HeapInUse(); h < int64(len(keep)) {
		t.Errorf("HeapInUse %d with %d bytes live", h, len(keep))
	}
	keep[0] = 1
	_ = keep
}

func TestSmallShare(t *testing.T) {
	for mem, want := range map[int64]int64{-1: 0, 0: 0, 16 << 20: 16 << 20, 256 << 20: SmallShareMax} {
		if got := SmallShare(mem); got != want {
			t.Errorf("SmallShare(%d) = %d, want %d", mem, got, want)
		}
	}
}
