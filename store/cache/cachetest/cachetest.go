// Package cachetest makes cache directories that cannot be written, for
// tests of the local caches' best-effort writes.
package cachetest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ReadOnly makes dir, and what it holds, impossible to write, even for
// root: dir is bind-mounted on itself read-only, and unmounted in
// t.Cleanup. As another user, where mounting needs privileges, dir loses
// its write permission instead.
func ReadOnly(t testing.TB, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return
	}
	must(t, run("mount", "--bind", dir, dir))
	t.Cleanup(func() { umount(t, dir) })
	must(t, run("mount", "-o", "remount,bind,ro", dir))
}

// FullDir returns a directory on a 64 KiB tmpfs that has been filled, so
// that writing a file there fails with ENOSPC. It is private (0700), as a
// mount's cache dir must be. It needs root.
func FullDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	mount(t, dir, "size=64k,mode=0700")
	f, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	return dir
}

// mount mounts a tmpfs with opts on dir and unmounts it in t.Cleanup.
func mount(t testing.TB, dir, opts string) {
	t.Helper()
	must(t, run("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir))
	t.Cleanup(func() { umount(t, dir) })
}

// umount unmounts dir; a failure fails t (a file left open there, say).
func umount(t testing.TB, dir string) {
	if err := run("umount", dir); err != nil {
		t.Error(err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// run runs a command and returns its output with the error.
func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %v: %s", name, args, err, bytes.TrimSpace(out))
	}
	return nil
}
