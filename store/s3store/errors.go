package s3store

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/pinfs/pinfs/store"
)

// mapErr turns an SDK error from op on what (an s3:// location) into an
// error that names both, wraps the store sentinel that fits (ErrNotFound,
// ErrAccessDenied, ErrThrottled) if any, and keeps the SDK error wrapped as
// well.
func mapErr(op, what string, err error) error {
	if sentinel := sentinelOf(err); sentinel != nil {
		return fmt.Errorf("s3store: %s %s: %w: %w", op, what, sentinel, err)
	}
	return fmt.Errorf("s3store: %s %s: %w", op, what, err)
}

// sentinelOf returns the store sentinel for an SDK error, or nil.
func sentinelOf(err error) error {
	var code string
	if ae, ok := errors.AsType[smithy.APIError](err); ok {
		code = ae.ErrorCode()
	}
	var status int
	var deleteMarker bool
	if re, ok := errors.AsType[*smithyhttp.ResponseError](err); ok && re.Response != nil {
		status = re.HTTPStatusCode()
		deleteMarker = re.Response.Header.Get("x-amz-delete-marker") == "true"
	}
	switch {
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
