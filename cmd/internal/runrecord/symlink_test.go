package runrecord

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// plant makes a symbolic link at p to a file elsewhere that holds a line,
// and returns a check that the target was left untouched.
func plant(t *testing.T, p string) func() {
	t.Helper()
	target := filepath.Join(t.TempDir(), "victim")
	orig := []byte(`{"not":"a record"}` + "\n")
	if err := os.WriteFile(target, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		got, err := os.ReadFile(target)
		if err != nil || !bytes.Equal(got, orig) {
			t.Fatalf("the link's target changed: %q, %v", got, err)
		}
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("the planted link was replaced: %v", err)
		}
	}
}

// TestLocalRefusesSymlink: a symbolic link planted at the record's path
// (say <cache-dir>/runs.jsonl) makes Open fail; it is not followed.
func TestLocalRefusesSymlink(t *testing.T) {
	p := filepath.Join(t.TempDir(), "runs.jsonl")
	untouched := plant(t, p)
	r, err := openLocalRecord(t, p, "run-1", digestA)
	if err == nil {
		r.Close(t.Context())
		t.Fatal("Open followed a symbolic link at the record's path")
	}
	if !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Open: %v; want it to say a symbolic link is refused", err)
	}
	untouched()
}

// TestSpoolRefusesSymlinks: a symbolic link planted at any file the spool
// opens (the lock, the spool, the local binding) makes Open fail.
func TestSpoolRefusesSymlinks(t *testing.T) {
	for _, name := range []string{"run-s.lock", "run-s.jsonl", "run-s.run.json"} {
		t.Run(name, func(t *testing.T) {
			f, spool := newFake(), t.TempDir()
			untouched := plant(t, filepath.Join(spool, name))
			r, err := Open(t.Context(), remoteOptions(f, spool, "run-s", digestA))
			if err == nil {
				r.Close(t.Context())
				t.Fatalf("Open followed a symbolic link at %s", name)
			}
			untouched()
		})
	}
}
