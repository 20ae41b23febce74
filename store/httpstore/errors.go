package httpstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/tier"
)

// StatusError is an answer with a status other than the one asked for.
// It wraps the store sentinel that fits: 404 store.ErrNotFound (and
// fs.ErrNotExist), 401 and 403 store.ErrAccessDenied, 429 and 503
// store.ErrThrottled; other statuses (5xx: the tier or the origin failed,
// which may pass) wrap none.
type StatusError struct {
	URL  string
	Code int
	is   []error
}

func (e *StatusError) Error() string {
	msg := "GET " + e.URL + ": HTTP " + strconv.Itoa(e.Code) + " " + http.StatusText(e.Code)
	if len(e.is) > 0 {
		msg += " (" + e.is[0].Error() + ")"
	}
	return msg
}

// Unwrap returns the sentinels.
func (e *StatusError) Unwrap() []error { return e.is }

func statusError(u string, code int) *StatusError {
	e := &StatusError{URL: u, Code: code}
	switch code {
	case http.StatusNotFound:
		e.is = []error{store.ErrNotFound, fs.ErrNotExist}
	case http.StatusUnauthorized, http.StatusForbidden:
		e.is = []error{store.ErrAccessDenied}
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		e.is = []error{store.ErrThrottled}
	}
	return e
}

// notContent is the error of a key that names no content: the tier serves
// none, so it is as missing (store.ErrNotFound), and no request is sent.
func notContent(key string) error {
	return fmt.Errorf("httpstore: %s: %w (an HTTP store serves only content: manifests, member tables, outboards and blocks)", key, store.ErrNotFound)
}

// do GETs u with the Range rng (none if "") and, if fresh, the bypass
// header, and returns a response of status 200 (206 for a range). Any
// other answer or a failed request is an error mapped to the store
// sentinels (see StatusError; a request that got no answer wraps
// store.ErrUnreachable).
func (s *Store) do(ctx context.Context, u, rng string, fresh bool) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("httpstore: %w", err)
	}
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	if fresh {
		req.Header.Set(tier.BypassHeader, "1")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, requestErr(ctx, u, err)
	}
	want := http.StatusOK
	if rng != "" {
		want = http.StatusPartialContent
	}
	if resp.StatusCode != want {
		resp.Body.Close()
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			return nil, redirectError(u, resp)
		}
		if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusPartialContent {
			return nil, fmt.Errorf("httpstore: GET %s (Range %q): HTTP %d: %w", u, rng, resp.StatusCode, store.ErrBadResponse)
		}
		return nil, statusError(u, resp.StatusCode)
	}
	return resp, nil
}

// requestErr maps the error of a request that got no answer.
func requestErr(ctx context.Context, u string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("httpstore: GET %s: %w", u, context.Cause(ctx))
	}
	var dns *net.DNSError
	var errno syscall.Errno
	var ne net.Error
	switch {
	case errors.As(err, &dns):
		return fmt.Errorf("httpstore: cannot reach %s: name lookup of %s failed: %w", u, dns.Name, store.ErrUnreachable)
	case errors.As(err, &errno) && (errno == syscall.ECONNREFUSED || errno == syscall.ECONNRESET ||
		errno == syscall.EHOSTUNREACH || errno == syscall.ENETUNREACH || errno == syscall.EPIPE):
		return fmt.Errorf("httpstore: cannot reach %s: %s: %w", u, errno.Error(), store.ErrUnreachable)
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("httpstore: GET %s: timed out: %w", u, err)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// The connection closed before a response.
		return fmt.Errorf("httpstore: cannot reach %s: the connection closed before a response: %w", u, store.ErrUnreachable)
	}
	return fmt.Errorf("httpstore: GET %s: %w", u, err)
}

// redirectError is do's error for a 3xx answer: the store follows no
// redirect (noRedirects), wherever it points, and a tier or origin that
// answers with one is misconfigured. It wraps store.ErrBadResponse.
func redirectError(u string, resp *http.Response) error {
	return fmt.Errorf("httpstore: GET %s: HTTP %d redirect to %q refused: an HTTP store is read at its own URL only, and follows no redirect: %w",
		u, resp.StatusCode, resp.Header.Get("Location"), store.ErrBadResponse)
}
