// Package httpstore is a read-only store.Store that reads everything
// through a tier of HTTP caches in front of a pinfs origin (pinfs serve),
// or from the origin directly: --store http(s)://HOST[:PORT][/PREFIX],
// whose root is the origin's root. The URLs are store/tier's.
//
// It asks only for content: metadata blobs that tier.Meta accepts
// (manifests, member tables, outboards) and member blocks by digest
// (ReadContent, store.ContentReader). Any other key (gates/, runs/,
// versions/) is not served by a tier, and reading it fails as a missing
// key does (store.ErrNotFound), so callers that probe optional keys
// behave as for a store without them. Members cannot be read by object
// (ReadRange, Stat), and nothing can be written.
//
// It needs and reads no credentials. Its requests go to the store URL's
// host only: no proxy from the environment, no redirect followed (a 3xx
// answer is an error wrapping store.ErrBadResponse), HTTP/1.1, no
// compression (the bytes must be the ones the tier cached). https uses
// the system's roots.
//
// # Bounds
//
// A metadata read (Get, GetAtMost, Open) is cut off when its answer
// delivers no byte for the stall timeout (an error wrapping
// store.ErrStalled), and a Get when it has not ended within the read
// timeout (ErrReadTimeout; a Get that fetches a bad copy again bypassing
// the tier makes two requests, each so bounded); an Open's answer must
// start within the read timeout, and its body, a member table that may be
// large, is then bounded by the stall timeout alone. Both are pinfs
// mount's --stall-timeout and --read-timeout (SetTimeouts; by default 30
// s and 60 s). Member bytes (ReadContent) are bounded by the block
// reader, which has the same two timeouts. A block whose answer has
// another length than the block's is ErrWrongLength, a bad copy rather
// than a failure of the tier.
//
// # Verification
//
// The tier is not trusted for integrity. Get checks a manifest or member
// table against the SHA-256 in its key and an outboard against the BLAKE3
// digest in its key (b3.CheckOutboard); a copy that fails is fetched once
// more with tier.BypassHeader, which makes the tier replace its copy, and
// a second failure is an error wrapping b3.ErrMismatch. Open (streamed
// member tables) and ReadContent do not verify: their callers do
// (verify.Fetch, store/blocks).
package httpstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/tier"
)

var (
	_ store.Store         = (*Store)(nil)
	_ store.AtMostGetter  = (*Store)(nil)
	_ store.ContentReader = (*Store)(nil)
)

// ErrByObject is the error of ReadRange and Stat: a tier names member
// bytes by content, not by object.
var ErrByObject = errors.New("the HTTP store reads members by content only (through the tier), not by object")

// ErrReadOnly is the error of Put and PutCAS.
var ErrReadOnly = errors.New("read-only store: an HTTP store (a tier or an origin) cannot be written")

// Store is a read-only store behind a tier (see the package doc). It is
// safe for concurrent use.
type Store struct {
	raw    string
	root   string // scheme://host[/prefix]/
	client *http.Client
	log    *slog.Logger
	limits timeouts // of the metadata reads: SetTimeouts
}

// New returns the store at raw, an http:// or https:// URL of the tier
// (or the origin) with an optional path prefix. It sends no request.
func New(raw string) (*Store, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("httpstore: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("httpstore: %q: want http:// or https://", raw)
	case u.Host == "":
		return nil, fmt.Errorf("httpstore: %q: no host", raw)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return nil, fmt.Errorf("httpstore: %q: want http(s)://HOST[:PORT][/PREFIX], without user, query or fragment", raw)
	}
	root := u.Scheme + "://" + u.Host + strings.TrimSuffix(u.EscapedPath(), "/") + "/"
	s := &Store{raw: raw, root: root, log: slog.Default(),
		client: &http.Client{Transport: newTransport(), CheckRedirect: noRedirects}}
	s.SetTimeouts(DefaultStallTimeout, DefaultReadTimeout)
	return s, nil
}

// noRedirects is the client's CheckRedirect: it follows no redirect, so
// that a request goes to the store URL's host only (a redirect could
// name any host, or http:// for an https:// store). The 3xx answer comes
// back to do, which refuses it (redirectError).
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// newTransport is the client's transport: connections to the tier only
// (no proxy from the environment), HTTP/1.1, no gzip, and timeouts on the
// dial and the response header; the request's ctx bounds the rest.
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
		TLSNextProto:          map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
}

// String returns the store URL.
func (s *Store) String() string { return s.raw }

// Get returns the verified blob at key (GetAtMost with store.MaxBlob).
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	return s.GetAtMost(ctx, key, store.MaxBlob(key))
}

// GetAtMost returns the blob at key if it holds at most max bytes, once
// its bytes match the digest in key; a copy that does not is fetched once
// more bypassing the tier's cache (see the package doc).
func (s *Store) GetAtMost(ctx context.Context, key string, max int64) ([]byte, error) {
	kind, hx, ok := tier.Meta(key)
	if !ok {
		return nil, notContent(key)
	}
	data, err := s.getBlob(ctx, key, max, false)
	if err != nil {
		return nil, err
	}
	bad := tier.Check(kind, hx, data)
	if bad == nil {
		return data, nil
	}
	s.log.Warn("a metadata blob from the tier does not match its digest; fetching it again bypassing the tier's cache",
		"store", s.raw, "key", key, "err", bad)
	if data, err = s.getBlob(ctx, key, max, true); err != nil {
		return nil, err
	}
	if bad = tier.Check(kind, hx, data); bad != nil {
		return nil, fmt.Errorf("httpstore: get %s: the origin's copy does not match either: %w", s.root+key, bad)
	}
	return data, nil
}

// getBlob GETs key, refusing more than max bytes, within the read
// timeout and cut off when it stalls (SetTimeouts).
func (s *Store) getBlob(ctx context.Context, key string, max int64, fresh bool) ([]byte, error) {
	g := s.guarded(ctx)
	defer g.stop()
	resp, err := s.do(g.ctx, s.root+key, "", fresh)
	if err != nil {
		return nil, g.explain(err)
	}
	body := &guardedBody{rc: resp.Body, g: g}
	defer body.Close()
	if resp.ContentLength > max {
		return nil, fmt.Errorf("httpstore: get %s: %w", s.root+key, store.TooLarge(key, max))
	}
	data, err := io.ReadAll(io.LimitReader(body, max+1))
	if err != nil {
		return nil, fmt.Errorf("httpstore: get %s: %w", s.root+key, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("httpstore: get %s: %w", s.root+key, store.TooLarge(key, max))
	}
	return data, nil
}

// Open returns a reader of the blob at key and its size (-1 if the tier
// does not say), unverified: verify.Fetch streams member tables through it
// and checks them. The answer must start within the read timeout, and its
// body is cut off when it stalls (SetTimeouts), until the reader is closed.
func (s *Store) Open(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	if _, _, ok := tier.Meta(key); !ok {
		return nil, 0, notContent(key)
	}
	g := s.guarded(ctx)
	resp, err := s.do(g.ctx, s.root+key, "", false)
	if err != nil {
		err = g.explain(err)
		g.stop()
		return nil, 0, err
	}
	g.headerIn()
	body := &guardedBody{rc: resp.Body, g: g}
	if max := store.MaxBlob(key); resp.ContentLength > max {
		body.Close()
		return nil, 0, fmt.Errorf("httpstore: open %s: %w", s.root+key, store.TooLarge(key, max))
	}
	return body, resp.ContentLength, nil
}

// ReadRange fails with ErrByObject: see ReadContent.
func (s *Store) ReadRange(ctx context.Context, obj store.Object, off, length int64) (io.ReadCloser, error) {
	return nil, fmt.Errorf("httpstore: read %v: %w", obj, ErrByObject)
}

// Stat fails with ErrByObject.
func (s *Store) Stat(ctx context.Context, obj store.Object) (store.Info, error) {
	return store.Info{}, fmt.Errorf("httpstore: stat %v: %w", obj, ErrByObject)
}

// Put fails with ErrReadOnly.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	return fmt.Errorf("httpstore: put %s: %w", key, ErrReadOnly)
}

// PutCAS fails with ErrReadOnly.
func (s *Store) PutCAS(ctx context.Context, digest string, r io.Reader, size int64) (store.Object, error) {
	return store.Object{}, fmt.Errorf("httpstore: put %s: %w", digest, ErrReadOnly)
}
