package mountstatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/fs"
	"github.com/pinfs/pinfs/fs/mountinfo"
	"github.com/pinfs/pinfs/store"
)

// Errors of Query. It returns one of them wrapped in a one-line message
// that names the path.
var (
	ErrNotExist = errors.New("does not exist")
	ErrNotMount = errors.New("is not a pinfs mount")
	ErrGone     = errors.New("the pinfs daemon is gone")
	ErrNoAnswer = errors.New("the pinfs daemon did not answer")
	// ErrStoreRefused: the daemon serves, but the store refused its last
	// fetch for access (Status.StoreError), so reads of bytes that are not
	// cached fail: the mount is not ready until a fetch succeeds.
	ErrStoreRefused = errors.New("the store refuses the mount's credentials")
)

// Query asks the pinfs mount whose root is dir for its Status. It always
// returns a Status: on an error it is the one not serving, with Error set
// to the error's text, for callers that print it either way.
//
// dir must be the root of a live pinfs mount: listed in
// /proc/self/mountinfo with type fuse.pinfs at exactly that path (after
// symbolic links), and answering getxattr of fs.XattrStatus. A dead mount
// (its daemon is gone: ENOTCONN) wraps ErrGone; anything else that is not
// such a root wraps ErrNotMount; a missing path wraps ErrNotExist. A
// daemon that serves but whose last fetch the store refused for access
// (StoreError of kind "access") wraps ErrStoreRefused: what it serves is
// only what it has cached.
//
// The query is bounded by ctx: when ctx ends first, Query returns at once,
// wrapping ErrNoAnswer when its deadline passed. The file system calls go
// on in a goroutine until the daemon answers or the process exits, which
// is what a caller stuck on a hung daemon does next.
func Query(ctx context.Context, dir string) (*Status, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return failed(&Status{Mountpoint: dir}, fmt.Errorf("%s: %w", dir, err))
	}
	var within time.Duration
	if dl, ok := ctx.Deadline(); ok {
		within = time.Until(dl).Round(10 * time.Millisecond)
	}
	type answer struct {
		b   []byte
		err error
	}
	ch := make(chan answer, 1)
	ask := askFunc
	go func() {
		b, err := ask(abs)
		ch <- answer{b, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil {
			return failed(&Status{Mountpoint: abs}, a.err)
		}
		return decode(abs, a.b)
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return failed(&Status{Mountpoint: abs}, fmt.Errorf("%s: %w within %v", abs, ErrNoAnswer, within))
		}
		return failed(&Status{Mountpoint: abs}, fmt.Errorf("%s: status query stopped: %w", abs, ctx.Err()))
	}
}

// decode parses the daemon's answer for the mount at dir.
func decode(dir string, b []byte) (*Status, error) {
	var st Status
	if err := json.Unmarshal(b, &st); err != nil {
		return failed(&Status{Mountpoint: dir}, fmt.Errorf("%s: the pinfs daemon's status is not valid JSON: %v", dir, err))
	}
	st.Mountpoint = dir // the path this caller sees, which may differ from the daemon's
	if !st.Serving {
		return failed(&st, fmt.Errorf("%s: the pinfs daemon says it is not serving", dir))
	}
	if se := st.StoreError; se != nil && se.Kind == string(store.KindAccess) {
		return failed(&st, fmt.Errorf("%s: %w (last refused at %s; reads of bytes not cached fail until a fetch succeeds): %s",
			dir, ErrStoreRefused, se.Time.UTC().Format(time.RFC3339), se.Message))
	}
	return &st, nil
}

// failed returns st marked not serving because of err, and err.
func failed(st *Status, err error) (*Status, error) {
	st.Serving, st.Error = false, err.Error()
	return st, err
}

// askFunc is ask; tests replace it with a daemon that does not answer.
var askFunc = ask

// FSType is the file system type of a pinfs mount in /proc/self/mountinfo.
const FSType = "fuse.pinfs"

// mountinfoPath is the mount table ask reads; tests point it elsewhere.
var mountinfoPath = mountinfo.Self

// ask reads the status attribute of the pinfs mount at dir.
func ask(dir string) ([]byte, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, classify(dir, err)
	}
	e, _, err := mountinfo.AtFile(mountinfoPath, real) // never touches real: it may be hung
	if err != nil {
		return nil, fmt.Errorf("%s: reading the mount table: %w", dir, err)
	}
	if e.FSType != FSType {
		return nil, fmt.Errorf("%s %w", dir, ErrNotMount)
	}
	b, err := getxattr(real, fs.XattrStatus)
	if err != nil {
		return nil, classify(dir, err)
	}
	return b, nil
}

// classify turns the error of a file system call on dir into Query's
// one-line errors.
func classify(dir string, err error) error {
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return fmt.Errorf("%s %w", dir, ErrNotExist)
	case errors.Is(err, syscall.ENOTCONN), errors.Is(err, syscall.ECONNABORTED):
		return fmt.Errorf("%s: %w (transport endpoint is not connected); remove the dead mount with pinfs unmount %s", dir, ErrGone, dir)
	case errors.Is(err, syscall.ENODATA), errors.Is(err, syscall.ENOTSUP):
		return fmt.Errorf("%s %w", dir, ErrNotMount)
	}
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is named once, first
	}
	return fmt.Errorf("%s: %w", dir, err)
}

// getxattr returns the value of attribute name of path, however long.
func getxattr(path, name string) ([]byte, error) {
	buf := make([]byte, 4096)
	for range 3 {
		n, err := unix.Getxattr(path, name, buf)
		if !errors.Is(err, unix.ERANGE) {
			if err != nil {
				return nil, err
			}
			return buf[:n], nil
		}
		size, err := unix.Getxattr(path, name, nil) // the value grew: ask its size
		if err != nil {
			return nil, err
		}
		buf = make([]byte, size+4096)
	}
	return nil, fmt.Errorf("getxattr %s: the value keeps growing", name)
}
