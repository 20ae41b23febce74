package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

func TestErrno(t *testing.T) {
	for _, c := range []struct {
		err  error
		want syscall.Errno
	}{
		{context.Canceled, syscall.EINTR},
		{fmt.Errorf("fetch block 7: %w", context.Canceled), syscall.EINTR},
		{fmt.Errorf("get: %w", context.DeadlineExceeded), syscall.EINTR},
		{store.ErrAccessDenied, syscall.EACCES},
		{fmt.Errorf("s3://b/k?versionId=v: %w", store.ErrAccessDenied), syscall.EACCES},
		{fmt.Errorf("s3://b/k?versionId=v: %w", store.ErrNotFound), syscall.EIO},
		{fmt.Errorf("x: %w", store.ErrVersionMismatch), syscall.EIO},
		{fmt.Errorf("bao: %w", verify.ErrInvalid), syscall.EIO},
		{io.ErrUnexpectedEOF, syscall.EIO},
		{syscall.ENOENT, syscall.EIO},
		{errors.New("connection reset"), syscall.EIO},
		{b3.ErrMismatch, syscall.EIO},
		{fmt.Errorf("blocks: a (s3://b/k?versionId=v) bytes 0+65536, fetched twice: %w", b3.ErrMismatch), syscall.EIO},
		{fmt.Errorf("outboard of blake3:ab: 8 bytes, want 72: %w", b3.ErrMismatch), syscall.EIO},
	} {
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		if got := Errno(c.err, log, "read a/b at 0"); got != c.want {
			t.Errorf("Errno(%v) = %v, want %v", c.err, got, c.want)
		}
		line := logs.String()
		if strings.Count(line, "\n") != 1 || !strings.Contains(line, "read a/b at 0") || !strings.Contains(line, c.err.Error()) {
			t.Errorf("Errno(%v) logged %q, want one line with the operation and the cause", c.err, line)
		}
		// A verification failure is named as such: it is not an I/O error
		// of the store but bytes that are not the pinned ones.
		if integrity := strings.Contains(line, "integrity failure"); integrity != errors.Is(c.err, b3.ErrMismatch) {
			t.Errorf("Errno(%v) logged %q: integrity failure named %v", c.err, line, integrity)
		}
	}
	if got := Errno(nil, nil, "nothing"); got != 0 {
		t.Errorf("Errno(nil) = %v", got)
	}
}
