package store

import (
	"context"
	"errors"
	"io/fs"
)

// Kind is what a failed store request says about the store, in the words
// that pinfs status reports (store_error.kind). Classify gives it.
type Kind string

// The kinds of Classify.
const (
	// KindAccess: the store refused the credentials (ErrAccessDenied: an
	// unknown access key, a wrong secret, a policy that denies the read;
	// fs.ErrPermission for a local store). Asking again with the same
	// credentials gets the same answer.
	KindAccess Kind = "access"
	// KindUnreachable: no answer (ErrUnreachable), or none in time
	// (context.DeadlineExceeded).
	KindUnreachable Kind = "unreachable"
	// KindMissing: the store answered that the key, object or pinned
	// version does not exist (ErrNotFound, fs.ErrNotExist).
	KindMissing Kind = "missing"
	// KindOther: any other failure (throttling, a 5xx, a bad response).
	KindOther Kind = "other"
)

// Classify returns the Kind of a failed store request's error, or "" for
// nil. An access refusal wins over everything else the error wraps: it
// is the one a person must act on.
func Classify(err error) Kind {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrAccessDenied), errors.Is(err, fs.ErrPermission):
		return KindAccess
	case errors.Is(err, ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return KindMissing
	case errors.Is(err, ErrUnreachable), errors.Is(err, context.DeadlineExceeded):
		return KindUnreachable
	}
	return KindOther
}
