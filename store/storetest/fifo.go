package storetest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// MakeFIFO makes a FIFO at p (and its directory), which nothing writes:
// opening it for reading the ordinary way blocks until a writer comes.
func MakeFIFO(t testing.TB, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Soon runs f and returns its error, failing t if f has not returned
// within 10 s: a read that blocks (on a FIFO) fails the test rather than
// hang it. The goroutine of a blocked f is left behind.
func Soon(t testing.TB, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s blocked for 10 s (on a FIFO?)", what)
		return nil
	}
}
