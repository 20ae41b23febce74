package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// asPinfsEnv, set in a test's environment, makes a child that pinfs
// starts from its own executable (pinfs mount's daemon) run as pinfs
// instead of running this package's tests again.
const asPinfsEnv = "PINFS_TEST_AS_PINFS"

func TestMain(m *testing.M) {
	if os.Getenv(asPinfsEnv) == "1" {
		main()
	}
	// Commands that load a table keep it in the default cache dir: the
	// tests' copies go to a dir of their own, not to the user's.
	tmp, err := os.MkdirTemp("", "pinfs-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_CACHE_HOME", filepath.Join(tmp, "xdg-cache"))
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}
