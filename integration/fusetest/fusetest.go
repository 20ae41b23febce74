// Package fusetest holds what tests that mount need: a check that FUSE is
// usable, a look at /proc/self/mountinfo that never touches the mount
// itself, and an unmount that cannot hang on a dead or hung daemon.
package fusetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pinfs/pinfs/fs/mountinfo"
)

// Require skips the test on a machine that cannot mount, or fails it when
// CI=true (CI must be able to run every test).
func Require(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but FUSE is not usable here (/dev/fuse: %v, euid %d)", err, os.Geteuid())
		}
		t.Skipf("FUSE not usable here (/dev/fuse: %v, euid %d)", err, os.Geteuid())
	}
}

// Entry is one mount of /proc/self/mountinfo.
type Entry = mountinfo.Entry

// Info returns the topmost mount at dir from /proc/self/mountinfo. It
// never stats dir, which would hang on a hung FUSE daemon.
func Info(dir string) (Entry, bool) {
	return mountinfo.At(dir)
}

// Mounted reports whether a FUSE file system is mounted at dir.
func Mounted(dir string) bool {
	e, ok := Info(dir)
	return ok && strings.HasPrefix(e.FSType, "fuse")
}

// ForceUnmount removes whatever is mounted at dir without ever blocking
// on its daemon: it aborts the FUSE connection, then detaches the mount.
func ForceUnmount(t testing.TB, dir string) {
	for range 5 {
		e, ok := Info(dir)
		if !ok {
			return
		}
		if strings.HasPrefix(e.FSType, "fuse") {
			conns := "/sys/fs/fuse/connections"
			if entries, _ := os.ReadDir(conns); len(entries) == 0 {
				exec.Command("mount", "-t", "fusectl", "none", conns).Run()
			}
			os.WriteFile(filepath.Join(conns, e.Minor, "abort"), []byte("1"), 0o200)
		}
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Logf("detaching %s: %v", dir, err)
		}
	}
}
