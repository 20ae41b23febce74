package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular: a path that should hold a file holds something else (a
// FIFO, a device, a directory, a symbolic link pinfs does not follow).
var ErrNotRegular = errors.New("not a regular file")

// notRegularError is an ErrNotRegular whose message says it once, in
// the words of why: "P is a FIFO, not a regular file".
type notRegularError struct{ msg string }

func (e *notRegularError) Error() string { return e.msg }
func (e *notRegularError) Unwrap() error { return ErrNotRegular }

// OpenRegular opens the file at p with flag (os.O_RDONLY, os.O_RDWR, with
// os.O_APPEND or os.O_CREATE as need be) and perm, never through a
// symbolic link at p itself (O_NOFOLLOW: its error wraps ErrNotRegular
// and says so), and returns it only if it is a regular file: it opens
// with O_NONBLOCK, so that a FIFO planted at p does not block the open
// until a writer comes, and checks the file it opened (fstat), so that
// what it returns cannot be swapped after the check. On a regular file
// O_NONBLOCK changes nothing.
func OpenRegular(p string, flag int, perm os.FileMode) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(p, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if errors.Is(err, syscall.ELOOP) {
		return nil, nil, &notRegularError{p + " is a symbolic link, which pinfs does not follow (remove it)"}
	}
	return regular(p, f, err)
}

// OpenUserFile opens, to read, a file the user named: on the command
// line, or in a file of theirs (the key files a --policy file names). It
// is OpenRegular except that it follows a symbolic link, since a link to
// a config file is the user's own to make; what the link leads to must
// still be a regular file, and a FIFO or a device there fails at once.
// Files pinfs finds by itself (a store's, a cache's, a run record's) are
// opened with OpenRegular.
func OpenUserFile(p string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	return regular(p, f, err)
}

// regular returns f, which os.OpenFile(p) returned with err, with its
// FileInfo if it is a regular file, and closes it otherwise.
func regular(p string, f *os.File, err error) (*os.File, fs.FileInfo, error) {
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &notRegularError{fmt.Sprintf("%s is a %s, not a regular file", p, fileKind(fi.Mode()))}
	}
	return f, fi, nil
}

// fileKind names the type of a file that is not regular.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	case m.IsDir():
		return "directory"
	}
	return "special file"
}

// ReadRegular reads the regular file at p (see OpenRegular), at most
// limit bytes (see ReadAtMost: a larger file is refused before it is
// read, naming p and limit).
func ReadRegular(p string, limit int64) ([]byte, error) {
	f, fi, err := OpenRegular(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAtMost(f, fi.Size(), limit, p)
}

// ReadUserFile reads the file at p that the user named (see OpenUserFile),
// at most limit bytes (see ReadAtMost: a larger file is refused before it
// is read, naming p and limit).
func ReadUserFile(p string, limit int64) ([]byte, error) {
	f, fi, err := OpenUserFile(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAtMost(f, fi.Size(), limit, p)
}
