package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/storetest"
)

// OpenRegular fails at once on a FIFO (which a plain open would block on
// until a writer came), a symbolic link and a directory.
func TestOpenRegularRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	storetest.MakeFIFO(t, fifo)
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("ok"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{fifo: "FIFO", link: "symbolic link", dir: "directory"} {
		err := storetest.Soon(t, "ReadRegular("+p+")", func() error { _, err := store.ReadRegular(p, 100); return err })
		if !errors.Is(err, store.ErrNotRegular) || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadRegular(%s): %v; want it refused as a %s", p, err, want)
		}
	}
	if b, err := store.ReadRegular(file, 2); err != nil || string(b) != "ok" {
		t.Fatalf("ReadRegular of a file: %q, %v", b, err)
	}
	if _, err := store.ReadRegular(file, 1); !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), file) {
		t.Fatalf("ReadRegular of 2 bytes, at most 1: %v; want it refused naming the file", err)
	}
}

// TestReadUserFile: a file the user names is read through a symbolic link
// (OpenRegular would refuse it), but what the path leads to must be a
// regular file of at most the limit: a FIFO, even behind a link, and a
// directory fail at once, naming the path.
func TestReadUserFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(file, []byte("ok"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	storetest.MakeFIFO(t, fifo)
	link, fifoLink := filepath.Join(dir, "link"), filepath.Join(dir, "fifo-link")
	for target, l := range map[string]string{file: link, fifo: fifoLink} {
		if err := os.Symlink(target, l); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := store.ReadUserFile(link, 2); err != nil || string(b) != "ok" {
		t.Fatalf("ReadUserFile through a link: %q, %v", b, err)
	}
	if _, err := store.ReadRegular(link, 2); !errors.Is(err, store.ErrNotRegular) {
		t.Fatalf("ReadRegular through a link: %v; want it refused", err)
	}
	for p, want := range map[string]string{fifo: "FIFO", fifoLink: "FIFO", dir: "directory"} {
		err := storetest.Soon(t, "ReadUserFile("+p+")", func() error { _, err := store.ReadUserFile(p, 100); return err })
		if !errors.Is(err, store.ErrNotRegular) || !strings.Contains(err.Error(), p+" is a "+want) {
			t.Errorf("ReadUserFile(%s): %v; want it refused as a %s", p, err, want)
		}
	}
	if _, err := store.ReadUserFile(link, 1); !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), link+": more than 1 bytes") {
		t.Fatalf("ReadUserFile of 2 bytes, at most 1: %v; want it refused naming the path and the limit", err)
	}
}
