package cache

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// How the writer puts the file of a member of one block in place (larger
// members go through their partial files, diskpart.go). Where the file system can
// (ext4, xfs, btrfs, tmpfs), the block is written to an unnamed file,
// open(2) with O_TMPFILE in the block's directory, and given its name
// with linkat(2) once every byte is written: no name is ever seen before
// the file is whole, a crash leaves nothing behind, and per block the
// directory changes once (a link) instead of three times (create, rename
// away, rename in). linkat fails if the name exists, so a block another
// process put there meanwhile is kept and this copy dropped. Elsewhere, or
// without /proc (linkat needs /proc/self/fd/N, or CAP_DAC_READ_SEARCH for
// AT_EMPTY_PATH), the block is written to a temporary file, named with
// tmpPrefix, and renamed; a scan removes such files left by a crash.
// Files are written with plain system calls: os.File would also try to
// register each with the poller.

// staged is a block written and not yet under its name: an unnamed file
// (fd >= 0), or a temporary file (tmp).
type staged struct {
	fd  int
	tmp string
}

// stage writes b to a new unnamed file in dir, or, when the file system
// cannot make one, to a temporary file there. The directory is made only
// when the open fails for want of it.
func (d *Disk) stage(dir string, b []byte) (staged, error) {
	if !d.noTmpfile.Load() {
		fd, err := openMkdir(dir, func() (int, error) {
			return unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
		})
		switch {
		case err == nil:
			if err := writeWhole(fd, b); err != nil {
				unix.Close(fd)
				return staged{fd: -1}, err
			}
			return staged{fd: fd}, nil
		case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL):
			d.noTmpfile.Store(true) // no O_TMPFILE here: temporary names from now on
		default:
			return staged{fd: -1}, err
		}
	}
	tmp, err := writeTemp(dir, b)
	return staged{fd: -1, tmp: tmp}, err
}

// place gives s the name final. It reports false, with no error, when
// final exists already (another process wrote the block). b is the
// block's bytes, written again to a temporary file if linkat turns out
// not to work here. s is discarded either way.
func (d *Disk) place(s staged, final string, b []byte) (bool, error) {
	if s.fd < 0 {
		return true, os.Rename(s.tmp, final)
	}
	err := linkFD(s.fd, final)
	unix.Close(s.fd)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EEXIST):
		return false, nil
	case errors.Is(err, unix.ENOENT) && !procFD():
		// No /proc to name the file by: temporary names from now on.
		d.noTmpfile.Store(true)
		tmp, err := writeTemp(filepath.Dir(final), b)
		if err != nil {
			return false, err
		}
		if err := os.Rename(tmp, final); err != nil {
			os.Remove(tmp)
			return false, err
		}
		return true, nil
	}
	return false, err
}

// empty reports whether s holds no file (nothing was staged).
func (s staged) empty() bool { return s.fd < 0 && s.tmp == "" }

// discard drops a staged block that was not placed.
func (s staged) discard() {
	switch {
	case s.fd >= 0:
		unix.Close(s.fd)
	case s.tmp != "":
		os.Remove(s.tmp)
	}
}

// linkFD names the unnamed file fd as path, through /proc/self/fd so that
// no capability is needed.
func linkFD(fd int, path string) error {
	for {
		err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
		if err != unix.EINTR {
			return err
		}
	}
}

// procFD reports whether /proc/self/fd is there.
func procFD() bool {
	_, err := os.Stat("/proc/self/fd")
	return err == nil
}

// writeTemp writes b to a new temporary file in dir and returns its name.
// The directory is made only when the create fails for want of it.
func writeTemp(dir string, b []byte) (string, error) {
	var name string
	fd, err := openMkdir(dir, func() (int, error) {
		for range 100 {
			name = filepath.Join(dir, tmpPrefix+strconv.FormatUint(rand.Uint64(), 36))
			fd, err := unix.Open(name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
			if err != unix.EEXIST {
				return fd, err
			}
		}
		return -1, unix.EEXIST
	})
	if err != nil {
		return "", &fs.PathError{Op: "create", Path: dir, Err: err}
	}
	err = writeWhole(fd, b)
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

// openMkdir calls open, and once more after making dir if open failed
// with ENOENT.
func openMkdir(dir string, open func() (int, error)) (int, error) {
	fd, err := open()
	if err == unix.ENOENT {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return -1, err
		}
		fd, err = open()
	}
	return fd, err
}

// writeWhole writes b, a whole member, to fd and makes the file 0400, the
// mode the open path requires of a whole-member file (a file written 0400
// from the start could not be reopened for writing by a retry).
func writeWhole(fd int, b []byte) error {
	if err := writeAll(fd, b); err != nil {
		return err
	}
	return unix.Fchmod(fd, 0o400)
}

// writeAll writes b to fd.
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "write", Path: "member file", Err: err}
		}
		b = b[n:]
	}
	return nil
}
