package mount

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// CleanStale detaches a dead FUSE mount at dir: one whose daemon is gone,
// so that every access fails with ENOTCONN. It reports whether it did.
func CleanStale(dir string) (bool, error) {
	_, err := os.Stat(dir)
	if !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.ECONNABORTED) {
		return false, nil
	}
	if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
		return false, fmt.Errorf("removing the dead mount at %s: %w", dir, err)
	}
	return true, nil
}

// Unmount unmounts dir. With lazy, a busy mount is detached at once and
// goes away when its last file is closed.
func Unmount(dir string, lazy bool) error {
	err := syscall.Unmount(dir, 0)
	if errors.Is(err, syscall.EBUSY) && lazy {
		err = syscall.Unmount(dir, syscall.MNT_DETACH)
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// CheckMountpoint returns a one-line error when dir cannot be mounted on:
// it does not exist, is not a directory, or is already a live pinfs
// mount. A dead mount is not an error (CleanStale removes it).
func CheckMountpoint(dir string) error {
	return nil // TODO(issue 13): helper B
}
