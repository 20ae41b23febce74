package store

import (
	"errors"
	"os"
	"syscall"
)

// SyncDir fsyncs a directory, so that an entry created, renamed, linked or
// removed in it is durable. File systems that cannot sync a directory
// (EINVAL) are accepted as they are.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}
