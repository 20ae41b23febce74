package fs

import (
	"context"
	"errors"
	"log/slog"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/b3"
)

// Errno maps a read-path error to an errno, the one mapping for the whole
// file system: context.Canceled and context.DeadlineExceeded (a kernel
// interrupt cancels the request's context) give EINTR,
// store.ErrAccessDenied gives EACCES, b3.ErrMismatch (bytes or an
// outboard that failed verification against the pinned digest) gives EIO
// and is logged as an integrity failure, and everything else
// (store.ErrNotFound of a pinned version, I/O) gives EIO: a member that
// exists is never reported as missing. It matches wrapped errors with
// errors.Is, unlike go-fuse's ToErrno.
//
// Errno logs err once, with what (the operation and its object) and the
// errno, on log (slog.Default() when nil): interrupts at debug level,
// everything else as an error. Callers must not log the error again.
// A nil err is 0 and logs nothing.
func Errno(err error, log *slog.Logger, what string) syscall.Errno {
	if err == nil {
		return 0
	}
	if log == nil {
		log = slog.Default()
	}
	e, level, msg := syscall.EIO, slog.LevelError, "pinfs: "+what
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		e, level = syscall.EINTR, slog.LevelDebug
	case errors.Is(err, store.ErrAccessDenied):
		e = syscall.EACCES
	case errors.Is(err, b3.ErrMismatch):
		msg = "pinfs: integrity failure: " + what
	}
	log.Log(context.Background(), level, msg, "errno", unix.ErrnoName(e), "err", store.Detail(err))
	return e
}
