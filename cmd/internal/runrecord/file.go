package runrecord

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/pinfs/pinfs/store"
)

// lockedFile is a file whose writers take a mutex within the process and
// an exclusive flock between processes. flock locks belong to the open
// file description, which every goroutine of the process shares, so the
// mutex is what orders goroutines.
type lockedFile struct {
	mu sync.Mutex
	f  *os.File
}

// lock takes the mutex and the flock; unlock releases both.
func (l *lockedFile) lock() error {
	l.mu.Lock()
	if err := flock(l.f, syscall.LOCK_EX); err != nil {
		l.mu.Unlock()
		return fmt.Errorf("runrecord: lock %s: %w", l.f.Name(), err)
	}
	return nil
}

func (l *lockedFile) unlock() {
	flock(l.f, syscall.LOCK_UN)
	l.mu.Unlock()
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// appendLine appends line to f (opened O_APPEND) and fsyncs it. The caller
// holds f's lock. If an earlier writer died in the middle of a line, that
// line is ended first so that line stays whole; if this write fails, f is
// cut back to where it was, so no half line is left for the next writer to
// continue.
func appendLine(f *os.File, line []byte) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if size > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], size-1); err != nil {
			return err
		}
		if last[0] != '\n' {
			line = append([]byte{'\n'}, line...)
		}
	}
	if _, err := f.Write(line); err != nil {
		f.Truncate(size)
		return err
	}
	return f.Sync()
}

// readAll reads f from the start, at most max bytes (see
// store.ReadAtMost).
func readAll(f *os.File, max int64) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return store.ReadAtMost(io.NewSectionReader(f, 0, fi.Size()), fi.Size(), max, f.Name())
}

// writeAtomic replaces the file p with data: a synced temp file renamed
// over p, then the directory synced.
func writeAtomic(p string, data []byte) (err error) {
	dir := filepath.Dir(p)
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(p)+"-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return err
	}
	return store.SyncDir(dir)
}

// openFile is os.OpenFile (which sets O_CLOEXEC) through
// store.OpenRegular: a symbolic link planted at p, say in a cache dir that
// another user could write to, makes it fail rather than be followed to a
// file of the attacker's choosing, and so does a FIFO (at once: it is
// opened without blocking), a device or a directory at p.
func openFile(p string, flag int, perm os.FileMode) (*os.File, error) {
	f, _, err := store.OpenRegular(p, flag, perm)
	return f, err
}

// readFile reads the regular file at p, at most max bytes, through
// openFile.
func readFile(p string, max int64) ([]byte, error) {
	f, err := openFile(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, max)
}

// openAppend opens p for appending (creating it 0644 and syncing its
// directory if it is new) and for reading back, never through a
// symbolic link.
func openAppend(p string) (*os.File, error) {
	created := false
	f, err := openFile(p, os.O_RDWR|os.O_APPEND, 0)
	if errors.Is(err, os.ErrNotExist) {
		f, err = openFile(p, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
		created = true
	}
	if err != nil {
		return nil, err
	}
	if created {
		if err := store.SyncDir(filepath.Dir(p)); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}
