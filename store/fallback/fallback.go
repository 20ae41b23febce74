// Package fallback is a store that reads through a primary store (a cache
// tier: store/httpstore) and, while the primary does not answer, from a
// second store (the origin's own store, say s3://bucket/prefix): the
// store of pinfs mount --fallback-store.
//
// The fallback is for availability only. Verification stays with the
// callers (verify.Fetch, store/blocks) whichever store the bytes come
// from, and a primary that answers is always used: an answer that the
// bytes are missing (store.ErrNotFound), a read-only refusal or a request
// canceled by its caller goes back as it is, so a mount with a healthy
// tier behaves, and sends its requests, exactly as one without the flag.
//
// Any other failure of the primary (it does not answer, answers 5xx or
// 401/403 or a redirect, cuts a body short or stalls) sends the read to
// the fallback, and so does every read for Hold after it, without asking
// the primary first: a tier that hangs costs a timeout once per Hold, not
// once per block. A stream (Open: a member table) that fails midway goes
// on from the fallback where it stopped. A copy that cannot be right (an
// error wrapping b3.ErrMismatch: a block of the wrong length) is the
// caller's to judge: the block reader fetches it again bypassing the
// tier's cache and, if that copy fails verification too, reads the block
// from the fallback (Fallback). A member read through the fallback is
// read by its pinned object (store.Content.Object), or by content when the
// fallback is itself a store.ContentReader (another tier). The log says
// when the primary fails and when it answers again.
//
// The primary's own reads must end for the fallback to answer:
// SetTimeouts passes pinfs mount's --stall-timeout and --read-timeout on
// to store/httpstore, whose metadata reads they bound.
package fallback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/b3"
)

// Hold is how long reads go straight to the fallback after the primary
// failed; then the primary is asked again.
const Hold = 10 * time.Second

// Primary is the store read first: it reads members by content.
type Primary interface {
	store.Store
	store.ContentReader
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.AtMostGetter  = (*Store)(nil)
	_ store.ContentReader = (*Store)(nil)
)

// Store reads through Primary and, while that fails, from a fallback (see
// the package doc). It is safe for concurrent use. Writes, ReadRange and
// Stat are the primary's.
type Store struct {
	Primary
	fallback store.Store
	log      *slog.Logger
	now      func() time.Time

	downUntil atomic.Int64 // unix ns; before it reads go to the fallback
	down      atomic.Bool  // the primary has failed and not answered since
	served    atomic.Int64 // reads the fallback served since the primary failed
}

// New returns a store that reads through primary and falls back to fb.
func New(primary Primary, fb store.Store, log *slog.Logger) *Store {
	if log == nil {
		log = slog.Default()
	}
	return &Store{Primary: primary, fallback: fb, log: log, now: time.Now}
}

// Served returns how many reads the fallback has served since the
// primary last failed.
func (s *Store) Served() int64 { return s.served.Load() }

// Get is GetAtMost with store.MaxBlob.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	return s.GetAtMost(ctx, key, store.MaxBlob(key))
}

// GetAtMost reads the blob at key from the primary, or the fallback.
func (s *Store) GetAtMost(ctx context.Context, key string, max int64) ([]byte, error) {
	if s.up() {
		b, err := store.GetAtMost(ctx, s.Primary, key, max)
		if !s.failed(ctx, err) {
			return b, err
		}
	}
	s.served.Add(1)
	return store.GetAtMost(ctx, s.fallback, key, max)
}

// Open streams the blob at key from the primary, or the fallback (Get
// when the fallback cannot stream). A primary's stream that fails midway
// (it stalls, is cut short) goes on from the fallback where it stopped
// (resumed), so that a member table read through a tier that stalls
// still loads.
func (s *Store) Open(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	if s.up() {
		rc, n, err := open(ctx, s.Primary, key)
		if !s.failed(ctx, err) {
			if err != nil {
				return nil, n, err
			}
			return &resumed{s: s, ctx: ctx, key: key, rc: rc}, n, nil
		}
	}
	s.served.Add(1)
	return open(ctx, s.fallback, key)
}

// ReadContent reads the member c from the primary, or the fallback.
func (s *Store) ReadContent(ctx context.Context, c store.Content, off, length int64, fresh bool) (io.ReadCloser, error) {
	if s.up() {
		rc, err := s.Primary.ReadContent(ctx, c, off, length, fresh)
		if !s.failed(ctx, err) {
			return s.watch(ctx, rc), err
		}
	}
	s.served.Add(1)
	return s.readFallback(ctx, c, off, length, fresh)
}

// readFallback reads the member c from the fallback: by content if it is
// a store.ContentReader (another tier; fresh passed on), else by its
// pinned object.
func (s *Store) readFallback(ctx context.Context, c store.Content, off, length int64, fresh bool) (io.ReadCloser, error) {
	if cr, ok := s.fallback.(store.ContentReader); ok {
		return cr.ReadContent(ctx, c, off, length, fresh)
	}
	if length < 0 {
		length = c.Size - off
	}
	return s.fallback.ReadRange(ctx, c.Object, off, length)
}

// Fallback returns a store.ContentReader that reads members from the
// fallback store alone, whether the primary is up or not: the block
// reader's (store/blocks Config.Fallback) for a block whose copies from
// the primary failed verification twice (the tier's copy, then the one
// that bypassed its cache). Its reads count as served by the fallback.
func (s *Store) Fallback() store.ContentReader { return fallbackReader{s} }

type fallbackReader struct{ s *Store }

// ReadContent reads c from the fallback store (fresh passed on to a
// fallback that reads by content).
func (f fallbackReader) ReadContent(ctx context.Context, c store.Content, off, length int64, fresh bool) (io.ReadCloser, error) {
	f.s.served.Add(1)
	return f.s.readFallback(ctx, c, off, length, fresh)
}

// SetTimeouts passes the bounds of metadata reads on to the primary
// (store/httpstore's SetTimeouts), if it has them: its reads must end
// for the fallback to answer.
func (s *Store) SetTimeouts(stall, read time.Duration) {
	if t, ok := s.Primary.(interface {
		SetTimeouts(stall, read time.Duration)
	}); ok {
		t.SetTimeouts(stall, read)
	}
}

// up reports whether a read should ask the primary first.
func (s *Store) up() bool { return s.now().UnixNano() >= s.downUntil.Load() }

// failed reports whether err is a failure of the primary that the
// fallback reads around, and then marks the primary down for Hold. A nil
// error after a failure says so in the log.
func (s *Store) failed(ctx context.Context, err error) bool {
	if err == nil {
		if s.down.CompareAndSwap(true, false) {
			s.log.Info("the store answers again; reads go through it", "store", s.Primary.String(),
				"served_by_fallback", s.served.Swap(0))
		}
		return false
	}
	if !reroutes(ctx, err) {
		return false
	}
	s.downUntil.Store(s.now().Add(Hold).UnixNano())
	if s.down.CompareAndSwap(false, true) {
		s.log.Warn("the store failed; reading from the fallback store", "store", s.Primary.String(),
			"fallback", s.fallback.String(), "retry_in", Hold, "err", err)
	}
	return true
}

// reroutes reports whether the fallback should answer in place of a
// primary that failed with err: not for the caller's own cancellation
// (but for a request cut off because it stalled: store.ErrStalled),
// nor for an answer about the bytes themselves (missing, too large) or a
// request the primary can never serve (a write, a read by object).
func reroutes(ctx context.Context, err error) bool {
	switch {
	case ctx.Err() != nil && !errors.Is(context.Cause(ctx), store.ErrStalled):
		return false // the caller's own cancellation; a stall is the primary's
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrTooLarge):
		return false
	case errors.Is(err, b3.ErrMismatch):
		// A copy whose length or bytes cannot be right: the caller's to
		// judge (it fetches it again bypassing the tier's cache, and only
		// then reads the fallback: Fallback), and no sign that the
		// primary is down.
		return false
	}
	return true
}

// watch returns rc, which marks the primary down when a read of it fails
// (a body cut short: the tier stopped mid-read), so that the caller's
// resumed request goes to the fallback at once.
func (s *Store) watch(ctx context.Context, rc io.ReadCloser) io.ReadCloser {
	if rc == nil {
		return nil
	}
	return &watched{ReadCloser: rc, s: s, ctx: ctx}
}

type watched struct {
	io.ReadCloser
	s   *Store
	ctx context.Context
}

func (w *watched) Read(p []byte) (int, error) {
	n, err := w.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		w.s.failed(w.ctx, err)
	}
	return n, err
}

// resumed is a primary's stream of a blob that goes on from the fallback
// when a read of it fails in a way the fallback reads around: the
// fallback's stream, its first bytes (those already read) skipped, takes
// over. The blob's bytes are the same in both stores (it is named by its
// digest), and the caller verifies them whole. It is used by one
// goroutine at a time.
type resumed struct {
	s     *Store
	ctx   context.Context
	key   string
	rc    io.ReadCloser
	read  int64 // bytes returned so far
	moved bool  // rc is the fallback's
}

func (r *resumed) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.read += int64(n)
	if err == nil || err == io.EOF || r.moved || !r.s.failed(r.ctx, err) {
		return n, err
	}
	r.s.served.Add(1)
	fb, _, ferr := open(r.ctx, r.s.fallback, r.key)
	if ferr == nil {
		if _, ferr = io.CopyN(io.Discard, fb, r.read); ferr != nil {
			fb.Close()
		}
	}
	if ferr != nil {
		return n, fmt.Errorf("%w (and the fallback store: %w)", err, ferr)
	}
	r.s.log.Info("a stream from the store failed midway; it goes on from the fallback store",
		"store", r.s.Primary.String(), "key", r.key, "at", r.read, "err", err)
	r.rc.Close()
	r.rc, r.moved = fb, true
	if n > 0 {
		return n, nil
	}
	return r.Read(p)
}

func (r *resumed) Close() error { return r.rc.Close() }

// open streams key from st when it can, and is Get otherwise.
func open(ctx context.Context, st store.Store, key string) (io.ReadCloser, int64, error) {
	if o, ok := st.(interface {
		Open(ctx context.Context, key string) (io.ReadCloser, int64, error)
	}); ok {
		return o.Open(ctx, key)
	}
	b, err := st.Get(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}
