package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMountMkdir: a mountpoint that does not exist is refused with one
// line naming mkdir -p and --mkdir, before anything is mounted; with -m
// (as mount(8)) pinfs mount creates it, with its parents, mode 0755, and
// serves the snapshot there.
func TestMountMkdir(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	cache, record := filepath.Join(f.work, "cache"), filepath.Join(f.work, "run.jsonl")
	parent := filepath.Join(t.TempDir(), "data")
	dir := filepath.Join(parent, f.digest)
	r := wantExit(t, f.env, 1, []string{"mountpoint " + dir + " does not exist: create it with mkdir -p " + dir + ", or pass --mkdir"},
		"mount", f.digest, dir, "--store", f.store, "--cache-dir", cache, "--run-record", record)
	if strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
		t.Errorf("the refusal is not one line of stderr: %v", r)
	}
	if _, err := os.Stat(parent); !os.IsNotExist(err) {
		t.Fatalf("a refused mount created %s: %v", parent, err)
	}

	startMount(t, f.env, dir, f.digest, dir, "-m", "--store", f.store, "--cache-dir", cache, "--run-record", record)
	for _, d := range []string{parent} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s after --mkdir: %v, %v; want a directory 0755", d, fi, err)
		}
	}
	if b, err := readFile(t, filepath.Join(dir, "README")); err != nil || !bytes.Equal(b, f.data["README"]) {
		t.Errorf("README through a mount at a created mountpoint: %q, %v", b, err)
	}
}
