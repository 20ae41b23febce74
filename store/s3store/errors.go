package s3store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/pinfs/pinfs/store"
)

var _ store.Detailer = (*requestError)(nil)

// requestError is a failed S3 request as a person reads it: Error() is one
// line that names the thing and the cause, without the SDK's chain of
// operation, attempts, request id and host id. It wraps the store
// sentinels that fit (errors.Is) and the SDK error (errors.As), which
// Detail returns for logs and --debug.
type requestError struct {
	msg string
	is  []error // store sentinels; fs.ErrNotExist for a missing key
	sdk error   // the SDK error; nil for a refusal pinfs made itself
}

func (e *requestError) Error() string { return e.msg }

// Unwrap returns the sentinels and the SDK error.
func (e *requestError) Unwrap() []error {
	if e.sdk == nil {
		return e.is
	}
	return append(e.is[:len(e.is):len(e.is)], e.sdk)
}

// Detail returns the SDK error's full text, or "" when there is none.
func (e *requestError) Detail() string {
	if e.sdk == nil {
		return ""
	}
	return e.sdk.Error()
}

// mapErr turns an SDK error from op on what (an s3:// location beginning
// with the bucket) into a requestError: one line that names the thing and
// the cause, wrapping the store sentinel that fits (ErrNotFound,
// ErrAccessDenied, ErrThrottled, ErrUnreachable for a request that got no
// answer) if any and the SDK error. A missing key or version also matches
// fs.ErrNotExist, as localstore's errors do, and a missing bucket does
// not: verify.Fetch tells "no such manifest" from "no such store" by it.
func mapErr(op, what string, err error) error {
	e := &requestError{sdk: err}
	sentinel := sentinelOf(err)
	if sentinel != nil {
		e.is = []error{sentinel}
	}
	bucket := bucketOf(what)
	code := errorCode(err)
	creds, credsFailed := errors.AsType[*credentialsError](err)
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		e.msg = op + " " + what + ": " + contextCause(err)
	case credsFailed:
		e.msg = creds.message()
	case code == "NoSuchBucket" && strings.Contains(what, "?versionId="):
		// A pinned member: which one matters as much as why.
		e.msg = op + " " + what + ": bucket " + bucket + " does not exist"
	case code == "NoSuchBucket":
		e.msg = "bucket " + bucket + " does not exist"
	case unknownKeyCode(code):
		e.msg = "s3://" + bucket + ": the access key ID is not known to the server (check AWS_ACCESS_KEY_ID or the profile)"
	case code == "SignatureDoesNotMatch":
		e.msg = "s3://" + bucket + ": the secret key is wrong (the signature does not match; check AWS_SECRET_ACCESS_KEY or the profile)"
	case sentinel == store.ErrNotFound:
		e.msg = op + " " + what + ": not found"
		e.is = append(e.is, fs.ErrNotExist)
	case sentinel == store.ErrAccessDenied:
		e.msg = "access denied to " + what
	case sentinel == store.ErrThrottled:
		e.msg = op + " " + what + ": " + store.ErrThrottled.Error()
		if code != "" {
			e.msg += " (" + code + ")"
		}
	default:
		if endpoint, cause, ok := unreachable(err); ok {
			e.msg = "cannot reach S3 at " + endpoint + ": " + cause
			e.is = append(e.is, store.ErrUnreachable)
		} else {
			e.msg = op + " " + what + ": " + shortCause(err)
		}
	}
	return e
}

// unversionedError is the refusal of a bucket whose versioning is not
// Enabled (status as S3 reports it; "" is a bucket on which versioning was
// never turned on): pinfs cannot pin its objects, nor keep a store's
// member bytes in it. It wraps store.ErrUnversioned.
func unversionedError(bucket, status string) error {
	if status == "" {
		status = "off"
	}
	return &requestError{
		msg: "bucket " + bucket + " does not have versioning enabled (status: " + status +
			"); enable it: pinfs pins exact object versions",
		is: []error{store.ErrUnversioned},
	}
}

// noVersion is the error of an upload to k that created no version (err,
// from store.NewVersion): the bucket's versioning is off or suspended, or
// the server ignores it.
func (b *Bucket) noVersion(ctx context.Context, k string, err error) error {
	if status, verr := b.versioning(ctx, b.bucket); verr == nil && status != types.BucketVersioningStatusEnabled {
		return unversionedError(b.bucket, string(status))
	}
	return fmt.Errorf("s3store: put %s: the upload created no version "+
		"(enable versioning on bucket %s): %w: %w", b.where(k), b.bucket, store.ErrUnversioned, err)
}

// sentinelOf returns the store sentinel for an SDK error, or nil.
func sentinelOf(err error) error {
	code := errorCode(err)
	var status int
	var deleteMarker bool
	if re, ok := errors.AsType[*smithyhttp.ResponseError](err); ok && re.Response != nil {
		status = re.HTTPStatusCode()
		deleteMarker = re.Response.Header.Get("x-amz-delete-marker") == "true"
	}
	switch {
	case unknownKeyCode(code) || code == "SignatureDoesNotMatch":
		// Before the status: versitygw answers an unknown key with 404.
		return store.ErrAccessDenied
	case code == "NoSuchKey" || code == "NoSuchVersion" || code == "NotFound" ||
		code == "NoSuchBucket" || status == http.StatusNotFound:
		return store.ErrNotFound
	case code == "AccessDenied" || status == http.StatusForbidden:
		return store.ErrAccessDenied
	case status == http.StatusMethodNotAllowed && deleteMarker:
		// The version asked for is a delete marker: it has no bytes.
		return store.ErrNotFound
	case throttleCode(code) || status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
		// S3 answers 503 (SlowDown) when a client should slow down.
		return store.ErrThrottled
	}
	return nil
}

// errorCode returns the S3 error code of err ("NoSuchKey"), or "".
func errorCode(err error) string {
	if ae, ok := errors.AsType[smithy.APIError](err); ok {
		return ae.ErrorCode()
	}
	return ""
}

// unknownKeyCode reports whether code says the server does not know the
// access key ID: InvalidAccessKeyId (S3), XAdminUserNotFound (versitygw).
func unknownKeyCode(code string) bool {
	return code == "InvalidAccessKeyId" || code == "XAdminUserNotFound"
}

// throttleCode reports whether code is an error code by which S3 or
// another AWS service asks the client to slow down (the SDK's list).
func throttleCode(code string) bool {
	_, ok := retry.DefaultThrottleErrorCodes[code]
	return ok || code == "TooManyRequests"
}

// isCode reports whether err is an S3 error with one of the given codes.
func isCode(err error, codes ...string) bool {
	ae, ok := errors.AsType[smithy.APIError](err)
	if !ok {
		return false
	}
	for _, c := range codes {
		if ae.ErrorCode() == c {
			return true
		}
	}
	return false
}

// bucketOf returns the bucket of an s3://bucket/… location.
func bucketOf(what string) string {
	b, _, _ := strings.Cut(strings.TrimPrefix(what, "s3://"), "/")
	return b
}

// contextCause names the context error in err.
func contextCause(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return context.DeadlineExceeded.Error()
	}
	return context.Canceled.Error()
}

// unreachable reports whether err is a request that never got an answer
// (the connection or name lookup failed), and returns the endpoint it was
// sent to (scheme://host) and the cause in a few words.
func unreachable(err error) (endpoint, cause string, ok bool) {
	ue, ok := errors.AsType[*url.Error](err)
	if !ok {
		return "", "", false
	}
	endpoint = ue.URL
	if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
		endpoint = u.Scheme + "://" + u.Host
	}
	var dns *net.DNSError
	var errno syscall.Errno
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		cause = "no such host"
	case errors.As(err, &dns):
		cause = "name lookup of " + dns.Name + " failed: " + dns.Err
	case errors.As(err, &errno):
		cause = errno.Error()
	case ue.Timeout():
		cause = "timed out"
	default:
		cause = ue.Err.Error()
	}
	return endpoint, cause, true
}

// shortCause returns the cause of an SDK error without the SDK's wrapping:
// the S3 error code and message, or the HTTP status, or the innermost
// error an operation failed with.
func shortCause(err error) string {
	if ae, ok := errors.AsType[smithy.APIError](err); ok {
		if msg := ae.ErrorMessage(); msg != "" {
			return ae.ErrorCode() + ": " + msg
		}
		return ae.ErrorCode()
	}
	if re, ok := errors.AsType[*smithyhttp.ResponseError](err); ok && re.Response != nil {
		return "HTTP " + re.Response.Status
	}
	for {
		switch e := err.(type) {
		case *smithy.OperationError:
			err = e.Err
			continue
		case *retry.MaxAttemptsError:
			err = e.Err
			continue
		}
		return err.Error()
	}
}

// credentialsError is a failure of the client's credential provider.
type credentialsError struct {
	err  error
	none bool // the default chain found no credentials and fell back to the EC2 instance role
}

func (e *credentialsError) Error() string { return e.err.Error() }
func (e *credentialsError) Unwrap() error { return e.err }

// message is the one line a person reads.
func (e *credentialsError) message() string {
	if e.none {
		return "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or give the pod a role"
	}
	return "cannot load the AWS credentials of the configured profile or source (the cause is in the log, or run with --debug)"
}
