package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Kind
	}{
		{nil, ""},
		{fmt.Errorf("s3://b: the secret key is wrong: %w", ErrAccessDenied), KindAccess},
		{&os.PathError{Op: "open", Path: "/s/manifests/x", Err: syscall.EACCES}, KindAccess},
		// versitygw answers an unknown key with 404: access wins.
		{errors.Join(ErrAccessDenied, ErrNotFound), KindAccess},
		{fmt.Errorf("get s3://b/k: %w", ErrNotFound), KindMissing},
		{&os.PathError{Op: "open", Path: "/s/k", Err: fs.ErrNotExist}, KindMissing},
		{fmt.Errorf("cannot reach S3 at http://h: connection refused: %w", ErrUnreachable), KindUnreachable},
		{fmt.Errorf("get s3://b/k: %w", context.DeadlineExceeded), KindUnreachable},
		{fmt.Errorf("get s3://b/k: %w", ErrThrottled), KindOther},
		{ErrVersionMismatch, KindOther},
		{errors.New("get s3://b/k: InternalError"), KindOther},
	} {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
