package mount

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestBackgroundRefusesSymlinkLog: a symbolic link planted at the daemon
// log's path makes Background fail before it starts anything; the link's
// target is not created or appended to.
func TestBackgroundRefusesSymlinkLog(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "victim")
	logPath := filepath.Join(dir, "mount.log")
	if err := os.Symlink(target, logPath); err != nil {
		t.Fatal(err)
	}
	// The args would make this test binary run no test at all, should
	// Background start it.
	_, _, err := Background([]string{"-test.run=^$"}, logPath, 30*time.Second)
	if err == nil {
		t.Fatal("Background followed a symbolic link to its log")
	}
	if _, serr := os.Lstat(target); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("the link's target was created (%v); Background: %v", serr, err)
	}
}
