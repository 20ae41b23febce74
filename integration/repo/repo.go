// Package repo finds the pinfs repository the integration tests run in, so
// that they can read its files (deploy/, Dockerfile, go.mod) and binaries.
package repo

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Root returns the nearest directory at or above the working directory
// that holds go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// MustRoot is Root for a test: it fails t when there is no repository.
func MustRoot(t testing.TB) string {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
