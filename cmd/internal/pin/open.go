package pin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// dirRoot is a directory being pinned, held open for the whole pin so that
// its files are opened beneath it rather than by a path that could be
// redirected after the walk.
type dirRoot struct {
	fd   int
	path string
}

// openRoot opens the directory dir without following a symbolic link.
func openRoot(dir string) (*dirRoot, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if fi, lerr := os.Lstat(dir); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s: a symbolic link, not a directory (pin the directory it points to)", dir)
		}
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return &dirRoot{fd: fd, path: dir}, nil
}

func (r *dirRoot) close() { unix.Close(r.fd) }

// fileID is what identifies a file while it is pinned: the walk records its
// device and inode, and the descriptor it is read from must have the same.
type fileID struct{ dev, ino uint64 }

// idOf returns the device and inode of fi, which came from lstat(2).
func idOf(fi fs.FileInfo) (fileID, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, fmt.Errorf("%s: no device and inode in %T", fi.Name(), fi.Sys())
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}, nil
}

// open opens the file rel (slash-separated, from the walk) beneath r once:
// every directory on the way and the file itself are opened without
// following a symbolic link (one swapped in fails with ELOOP or ENOTDIR),
// and the file without blocking (a FIFO swapped in would block a plain
// open). It then checks with fstat(2) that the descriptor is a regular file
// of size bytes with the device and inode the walk saw, and returns it with
// that stat, against which the caller checks the file again at the end.
func (r *dirRoot) open(rel string, id fileID, size int64) (*os.File, *unix.Stat_t, error) {
	dir := r.fd
	names := strings.Split(rel, "/")
	for _, name := range names[:len(names)-1] {
		fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if dir != r.fd {
			unix.Close(dir)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("replaced while it was being pinned: opening %s: %w", name, err)
		}
		dir = fd
	}
	fd, err := unix.Openat(dir, names[len(names)-1],
		unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if dir != r.fd {
		unix.Close(dir)
	}
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, nil, fmt.Errorf("replaced by a symbolic link while it was being pinned: %w", err)
		}
		return nil, nil, err
	}
	st, err := checkOpened(fd, id, size)
	if err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	// A regular file does not block; clear the flag all the same so that
	// the descriptor behaves as a plain open file.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	return os.NewFile(uintptr(fd), r.path+"/"+rel), st, nil
}

// checkOpened fstats fd and checks that it is the regular file of size
// bytes with identity id.
func checkOpened(fd int, id fileID, size int64) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, fmt.Errorf("replaced while it was being pinned: no longer a regular file (mode %#o)", st.Mode)
	case uint64(st.Dev) != id.dev || uint64(st.Ino) != id.ino:
		return nil, errors.New("replaced while it was being pinned: not the file that was listed")
	case st.Size != size:
		return nil, errChanged
	}
	return &st, nil
}

// checkDir checks that fd is the directory with identity id.
func checkDir(fd int, id fileID) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if uint64(st.Dev) != id.dev || uint64(st.Ino) != id.ino {
		return errors.New("replaced while it was being pinned: not the directory that was opened")
	}
	return nil
}

// unchanged reports errChanged if the file open at f is no longer what st
// described: its size, modification or change time differ.
func unchanged(f *os.File, st *unix.Stat_t) error {
	var now unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &now); err != nil {
		return err
	}
	if now.Size != st.Size || now.Mtim != st.Mtim || now.Ctim != st.Ctim {
		return errChanged
	}
	return nil
}
