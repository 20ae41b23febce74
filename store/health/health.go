// Package health remembers how a store's fetches end, for pinfs status
// and for the check a mount makes before it serves: Store wraps a
// store.Store and keeps the last failure of a fetch (a blob Get, a member
// ReadRange or Stat) with its kind (store.Classify) and time.
//
// # What clears a failure
//
// A fetch that succeeds clears the failure. An access refusal
// (store.KindAccess) is kept over later failures that say nothing of the
// credentials (unreachable, other): only a success, an answer that the
// bytes are missing (the store took the credentials to say so), or
// another refusal replaces it. A mount whose credentials were refused
// thus stays refused through a network blip, until the store takes them
// again.
//
// A fetch canceled by its caller (context.Canceled: an interrupted read,
// a stalled request cut off) says nothing about the store and changes
// nothing. Only the request is watched, not the body a ReadRange returns:
// a body cut short is the block reader's to retry.
package health

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/pinfs/pinfs/store"
)

// Failure is a fetch that failed: its kind, its one-line error and when
// it ended.
type Failure struct {
	Kind    store.Kind
	Message string
	Time    time.Time
}

var (
	_ store.Store        = (*Store)(nil)
	_ store.AtMostGetter = (*Store)(nil)
)

// Store is a store.Store whose fetches are watched. Its methods are safe
// for concurrent use; Last and Answered may be called at any time.
// Methods other than the fetches (Put, PutCAS) pass through unwatched.
// Optional interfaces of the wrapped store other than store.AtMostGetter
// (store.KeyLister, store.Swapper, ...) do not pass through at all: a
// type assertion on a Store finds only the methods of store.Store, so
// wrap only the store a mount reads through.
type Store struct {
	store.Store
	now func() time.Time // time.Now; tests set it

	last     atomic.Pointer[Failure]
	answered atomic.Int64
}

// New returns s, watched.
func New(s store.Store) *Store { return &Store{Store: s, now: time.Now} }

// Last returns the failure of the last fetch (see the package doc for
// which one that is), or nil when the last fetch succeeded or none failed.
func (s *Store) Last() *Failure { return s.last.Load() }

// Answered returns how many fetches have succeeded.
func (s *Store) Answered() int64 { return s.answered.Load() }

// Get is the wrapped store's Get, watched.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := s.Store.Get(ctx, key)
	s.note(err)
	return b, err
}

// GetAtMost is the wrapped store's GetAtMost (store.GetAtMost), watched.
func (s *Store) GetAtMost(ctx context.Context, key string, max int64) ([]byte, error) {
	b, err := store.GetAtMost(ctx, s.Store, key, max)
	s.note(err)
	return b, err
}

// ReadRange is the wrapped store's ReadRange, watched until it returns
// the body.
func (s *Store) ReadRange(ctx context.Context, obj store.Object, off, length int64) (io.ReadCloser, error) {
	rc, err := s.Store.ReadRange(ctx, obj, off, length)
	s.note(err)
	return rc, err
}

// Open streams the blob under key from the wrapped store when it can (it
// has Open, as verify.Opener), watched until it returns the reader, and
// is Get otherwise. Through Open a mount streams its member table rather
// than holding all of it (3.5 GB for 10M members) at once.
func (s *Store) Open(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	o, ok := s.Store.(interface {
		Open(ctx context.Context, key string) (io.ReadCloser, int64, error)
	})
	if !ok {
		b, err := s.Get(ctx, key)
		if err != nil {
			return nil, 0, err
		}
		return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
	}
	rc, n, err := o.Open(ctx, key)
	s.note(err)
	return rc, n, err
}

// Content returns the wrapped store's store.ContentReader, watched like
// ReadRange, or nil if it reads no member by content: a Store has no
// ReadContent method of its own, so that a type assertion does not find
// one the wrapped store lacks.
func (s *Store) Content() store.ContentReader {
	cr, ok := s.Store.(store.ContentReader)
	if !ok {
		return nil
	}
	return watchedContent{s: s, cr: cr}
}

// watchedContent is a Store's ContentReader.
type watchedContent struct {
	s  *Store
	cr store.ContentReader
}

// ReadContent is the wrapped ReadContent, watched until it returns the body.
func (w watchedContent) ReadContent(ctx context.Context, c store.Content, off, length int64, fresh bool) (io.ReadCloser, error) {
	rc, err := w.cr.ReadContent(ctx, c, off, length, fresh)
	w.s.note(err)
	return rc, err
}

// Stat is the wrapped store's Stat, watched.
func (s *Store) Stat(ctx context.Context, obj store.Object) (store.Info, error) {
	info, err := s.Store.Stat(ctx, obj)
	s.note(err)
	return info, err
}

// note records how a fetch ended.
func (s *Store) note(err error) {
	if err == nil {
		s.answered.Add(1)
		if s.last.Load() != nil {
			s.last.Store(nil)
		}
		return
	}
	if errors.Is(err, context.Canceled) {
		return
	}
	f := &Failure{Kind: store.Classify(err), Message: err.Error(), Time: s.now()}
	for {
		old := s.last.Load()
		if old != nil && old.Kind == store.KindAccess && f.Kind != store.KindAccess && f.Kind != store.KindMissing {
			return // says nothing of the credentials that were refused
		}
		if s.last.CompareAndSwap(old, f) {
			return
		}
	}
}
