package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// requireRoot fails under CI and skips elsewhere when the test cannot
// chown (CI runs as root).
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but not root: cannot give a directory to another user")
		}
		t.Skip("needs root to give a directory to another user")
	}
}

// mountOnce runs pinfs mount --foreground against an empty local store
// (so it would fail later, at loading the manifest) and returns its exit
// code and stderr.
func mountOnce(t *testing.T, extra ...string) (int, string) {
	t.Helper()
	digest := "sha256:" + strings.Repeat("0", 64)
	args := append([]string{"mount", digest, t.TempDir(), "--store", t.TempDir(), "--foreground"}, extra...)
	var out, errb bytes.Buffer
	code := run(t.Context(), args, &out, &errb)
	return code, errb.String()
}

// TestMountRefusesForeignCacheDir: a cache dir that belongs to another
// user (say, one pre-created in /tmp) is refused with one line and exit
// 1, before anything is written into it.
func TestMountRefusesForeignCacheDir(t *testing.T) {
	requireRoot(t)
	cache := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(cache, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(cache, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	code, stderr := mountOnce(t, "--cache-dir", cache)
	if code != exitFailed || !strings.Contains(stderr, "owned by uid 65534") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q; want exit 1 and one line naming the owner", code, stderr)
	}
	if entries, _ := os.ReadDir(cache); len(entries) > 0 {
		t.Fatalf("pinfs wrote into a cache dir of another user: %v", entries)
	}
}

// TestMountCreatesCacheDirPrivate: a cache dir that pinfs creates is 0700.
func TestMountCreatesCacheDirPrivate(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "a", "cache")
	mountOnce(t, "--cache-dir", cache)
	fi, err := os.Stat(cache)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("cache dir created %v; want 0700", fi.Mode().Perm())
	}
}

// TestDefaultCacheDirWithoutHome: with neither $XDG_CACHE_HOME nor $HOME
// there is no default (never a shared, guessable /tmp/pinfs-cache), and
// mount asks for --cache-dir.
func TestDefaultCacheDirWithoutHome(t *testing.T) {
	t.Setenv("HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	if d := defaultCacheDir(); d != "" {
		t.Fatalf("defaultCacheDir() = %q without $HOME; want none", d)
	}
	code, stderr := mountOnce(t)
	if code != exitFailed || !strings.Contains(stderr, "--cache-dir") {
		t.Fatalf("exit %d, stderr %q; want exit 1 asking for --cache-dir", code, stderr)
	}
	if _, err := os.Lstat(filepath.Join(os.TempDir(), "pinfs-cache", "meta")); err == nil {
		t.Log("note: /tmp/pinfs-cache/meta exists (left by an older pinfs?)")
	}
}
