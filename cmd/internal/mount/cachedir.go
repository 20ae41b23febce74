package mount

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// PrepareCacheDir makes dir ready to hold a mount's block cache, verified
// metadata, run record, spool and logs, before anything is written there.
// A missing dir is created 0700 (with any missing parents). An existing
// one is refused, with a one-line error, when it is not a directory, when
// it belongs to another user than the effective one (for root: a dir not
// owned by uid 0), or when group or others may write to it: such a dir
// could have been pre-created, or be filled, by another local user.
// Symbolic links in dir are resolved first, and the directory they lead
// to is the one checked.
func PrepareCacheDir(dir string) error {
	if dir == "" {
		return errors.New("no cache dir: pass --cache-dir DIR")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cache dir: %w", err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("cache dir: %w", err)
	}
	fi, err := os.Lstat(real)
	if err != nil {
		return fmt.Errorf("cache dir: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("cache dir %s is not a directory", dir)
	case !ok:
		return fmt.Errorf("cache dir %s: cannot tell its owner", dir)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("cache dir %s is owned by uid %d, not by this user (uid %d): refusing to use it; choose another --cache-dir",
			dir, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("cache dir %s is writable by other users (mode %#o): refusing to use it; chmod go-w it or choose another --cache-dir",
			dir, fi.Mode().Perm())
	}
	return nil
}
