package verify_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pinfs/pinfs/store/storetest"
	"github.com/pinfs/pinfs/verify"
)

// indexed builds the index of a snapshot's table in a fresh directory
// and returns the store, the manifest and the index's path.
func indexed(t *testing.T) (*indexing, *verify.Manifest, string) {
	t.Helper()
	x, m, _ := newIndexing(t, treeMembers())
	s, err := verify.Load(context.Background(), x, m.SnapshotID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ps, _ := filepath.Glob(filepath.Join(x.dir, "*.v*"))
	if len(ps) != 1 {
		t.Fatalf("indexes after a load: %v", ps)
	}
	return x, m, ps[0]
}

// TestCloseUnmapsTheIndex: a snapshot loaded from an index holds
// mappings of its files until Close, and none after.
func TestCloseUnmapsTheIndex(t *testing.T) {
	x, m, _ := indexed(t)
	if n := storetest.MappingsUnder(t, x.dir); n != 0 {
		t.Fatalf("%d mappings left after the first snapshot's Close", n)
	}
	s, err := verify.Load(context.Background(), x, m.SnapshotID)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Table().Mapped() || storetest.MappingsUnder(t, x.dir) == 0 {
		t.Fatalf("the snapshot from the index is not mapped (Mapped %v)", s.Table().Mapped())
	}
	if got := s.Table().Path(0); got == "" {
		t.Fatal("no path")
	}
	s.Close()
	s.Close() // idempotent
	if n := storetest.MappingsUnder(t, x.dir); n != 0 {
		t.Fatalf("%d mappings after Close", n)
	}
}

// TestExhaustedMappingKeepsTheIndex: an index the process cannot map for
// want of memory or files is not damaged: it is kept, Fetch fails with
// the cause, nothing is read from the store, and the next load maps it.
func TestExhaustedMappingKeepsTheIndex(t *testing.T) {
	x, m, path := indexed(t)
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	streamed := x.noCopy
	for _, e := range []syscall.Errno{syscall.ENOMEM, syscall.EMFILE, syscall.ENFILE} {
		restore := verify.SetMmap(func(int, int64, int, int, int) ([]byte, error) { return nil, e })
		_, err := verify.Load(context.Background(), x, m.SnapshotID)
		restore()
		if !errors.Is(err, e) {
			t.Errorf("Load while mmap fails with %v: %v", e, err)
		}
		after, serr := os.Stat(path)
		if serr != nil || !os.SameFile(before, after) {
			t.Fatalf("after mmap failed with %v the index is gone or replaced (%v); logged %q", e, serr, x.logged())
		}
	}
	if x.noCopy != streamed {
		t.Errorf("the table was read %d times from the store while the index was good", x.noCopy-streamed)
	}
	s, err := verify.Load(context.Background(), x, m.SnapshotID)
	if err != nil || !s.Table().Mapped() {
		t.Fatalf("Load once mmap works: %v", err)
	}
	s.Close()
}

// TestFailedOpenUnmapsWhatItMapped: a mapping that fails half way through
// an index leaves no mapping of the sections mapped before it.
func TestFailedOpenUnmapsWhatItMapped(t *testing.T) {
	x, m, _ := indexed(t)
	calls := 0
	restore := verify.SetMmap(func(fd int, off int64, n, prot, flags int) ([]byte, error) {
		if calls++; calls == 3 {
			return nil, syscall.ENOMEM
		}
		return verify.RealMmap(fd, off, n, prot, flags)
	})
	defer restore()
	if _, err := verify.Load(context.Background(), x, m.SnapshotID); !errors.Is(err, syscall.ENOMEM) {
		t.Fatalf("Load: %v", err)
	}
	if n := storetest.MappingsUnder(t, x.dir); n != 0 {
		t.Fatalf("%d mappings left by a failed open", n)
	}
}

// TestBadStreamUnmapsItsSections: a table streamed into a new index that
// fails its digest leaves no mapping of the sections it was built into.
func TestBadStreamUnmapsItsSections(t *testing.T) {
	x, m, table := newIndexing(t, treeMembers())
	bad := []byte(strings.Replace(string(table), "many/f0001", "many/f000X", 1))
	if string(bad) == string(table) {
		t.Fatal("no path to change")
	}
	x.openBytes = bad
	s, err := verify.Load(context.Background(), x, m.SnapshotID)
	if err != nil {
		t.Fatalf("Load (the stream fails, Get serves the good table): %v", err)
	}
	defer s.Close()
	if x.opens == 0 {
		t.Fatal("the table was not streamed")
	}
	if n := storetest.MappingsUnder(t, x.dir); n != 0 {
		t.Fatalf("%d mappings left by a stream that failed its digest", n)
	}
}
