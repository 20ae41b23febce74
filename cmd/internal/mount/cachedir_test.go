package mount

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrepareCacheDir: a missing dir is made 0700; an existing one of
// this user is accepted, also through a symbolic link; one that others
// may write to, or that is not a directory, is refused with one line.
func TestPrepareCacheDir(t *testing.T) {
	base := t.TempDir()
	fresh := filepath.Join(base, "x", "cache")
	if err := PrepareCacheDir(fresh); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("created %v, %v; want 0700", fi.Mode().Perm(), err)
	}
	if err := PrepareCacheDir(fresh); err != nil {
		t.Fatalf("again: %v", err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(fresh, link); err != nil {
		t.Fatal(err)
	}
	if err := PrepareCacheDir(link); err != nil {
		t.Fatalf("through a link to our own dir: %v", err)
	}

	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o1777); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{open: "writable by other users", file: "not a directory", "": "--cache-dir"} {
		err := PrepareCacheDir(dir)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("PrepareCacheDir(%q) = %v; want one line saying %q", dir, err, want)
		}
	}
}

// TestPrepareCacheDirRefusesOtherOwner: a dir of another user is refused
// (for root too), whatever its mode.
func TestPrepareCacheDirRefusesOtherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but not root: cannot give a directory to another user")
		}
		t.Skip("needs root to give a directory to another user")
	}
	dir := filepath.Join(t.TempDir(), "theirs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := PrepareCacheDir(dir); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Fatalf("PrepareCacheDir of a dir owned by 65534 = %v; want a refusal", err)
	}
}
