package main

import (
	"os"
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
	os.Exit(m.Run())
}
