// Package metacache keeps verified metadata blobs (manifests, member
// tables, Bao outboards) in a local directory, in front of a remote store,
// so that a remount reads them locally and works while the store is
// unreachable.
//
// Every key is a content address, so a local copy is as good as the
// remote one when it is intact. Get checks manifest and member-table
// copies against the digest in their key before it returns them and
// falls back to the remote on a bad copy; outboards cannot be checked on
// their own, so the read path asks for a fresh one (Outboard with fresh)
// after a block fails verification.
//
// Keeping a copy is best effort: a directory that cannot be created or
// written (a full disk, a read-only or foreign-owned cache dir) does not
// fail a read that the store can serve. Each copy that cannot be kept is
// counted (Stats) and the first is logged.
package metacache

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// Cache is a read-through cache of metadata blobs. It is safe for
// concurrent use: writes are atomic renames of complete files.
type Cache struct {
	dir    string
	remote store.Blobs
	log    *slog.Logger

	writeErrors atomic.Int64
	warned      atomic.Bool
}

// Stats counts a Cache's failures.
type Stats struct {
	WriteErrors int64 // blobs from the store that could not be kept locally
}

// Option configures New.
type Option func(*Cache)

// WithLogger makes the cache log the first copy it cannot keep to l. The
// default discards.
func WithLogger(l *slog.Logger) Option {
	return func(c *Cache) {
		if l != nil {
			c.log = l
		}
	}
}

// New returns a cache in dir in front of remote, creating dir if it can.
// A dir it cannot create is counted and logged like a copy that cannot be
// kept: the cache then serves from remote.
func New(dir string, remote store.Blobs, opts ...Option) *Cache {
	c := &Cache{dir: dir, remote: remote, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(c)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		c.writeFailed(dir, err)
	}
	return c
}

// String names the store the cache is in front of (errors such as
// verify.Fetch's name it), or the cache directory when it has none.
func (c *Cache) String() string {
	if s, ok := c.remote.(fmt.Stringer); ok {
		return s.String()
	}
	return c.dir
}

// IndexDir is where verify.Fetch keeps the index of every member table it
// reads through the cache (verify.Indexer): DIR/index, beside the tables.
func (c *Cache) IndexDir() string { return filepath.Join(c.dir, "index") }

// IndexLog is the cache's logger.
func (c *Cache) IndexLog() *slog.Logger { return c.log }

var _ verify.Indexer = (*Cache)(nil)

// Stats returns the cache's counters.
func (c *Cache) Stats() Stats { return Stats{WriteErrors: c.writeErrors.Load()} }

// Get returns the blob under key: GetAtMost with store.MaxBlob(key).
func (c *Cache) Get(ctx context.Context, key string) ([]byte, error) {
	return c.GetAtMost(ctx, key, store.MaxBlob(key))
}

// GetAtMost returns the blob under key if it holds at most max bytes: the
// local copy when it is intact, otherwise the remote one, which is then
// kept locally. A local copy is read only if it is a regular file of at
// most max bytes (store.ReadRegular); the remote one through
// store.GetAtMost.
func (c *Cache) GetAtMost(ctx context.Context, key string, max int64) ([]byte, error) {
	if b, err := c.local(key, max); err == nil && intact(key, b) {
		return b, nil
	}
	return c.fetch(ctx, key, max)
}

// Outboard returns the Bao outboard of the member with digest d and size
// bytes. Members of at most one verification group have no stored
// outboard; their 8-byte outboard is built here. fresh bypasses the local
// copy and replaces it with the remote one.
func (c *Cache) Outboard(ctx context.Context, d b3.Sum, size int64, fresh bool) ([]byte, error) {
	if size <= b3.GroupSize {
		return binary.LittleEndian.AppendUint64(nil, uint64(size)), nil
	}
	key := verify.OutboardKey(d.Hex())
	want := b3.OutboardSize(size)
	if !fresh {
		if b, err := c.local(key, int64(want)); err == nil && len(b) == want {
			return b, nil
		}
	}
	// An outboard longer than want is refused as it is read, shorter ones
	// below: either is the wrong size, b3.ErrMismatch (final for the block
	// reader), not a read to try again.
	b, err := c.fetch(ctx, key, int64(want))
	if errors.Is(err, store.ErrTooLarge) {
		return nil, fmt.Errorf("outboard of %s: more than %d bytes: %w (%w)", d, want, b3.ErrMismatch, err)
	}
	if err != nil {
		return nil, err
	}
	if len(b) != want {
		return nil, fmt.Errorf("outboard of %s: %d bytes, want %d: %w", d, len(b), want, b3.ErrMismatch)
	}
	return b, nil
}

func (c *Cache) path(key string) (string, error) {
	if err := store.CheckKey(key); err != nil {
		return "", err
	}
	return filepath.Join(c.dir, filepath.FromSlash(key)), nil
}

// local reads the local copy of key, if it is a regular file of at most
// max bytes.
func (c *Cache) local(key string, max int64) ([]byte, error) {
	p, err := c.path(key)
	if err != nil {
		return nil, err
	}
	return store.ReadRegular(p, max)
}

// fetch reads key, at most max bytes, from the remote and stores a copy.
func (c *Cache) fetch(ctx context.Context, key string, max int64) ([]byte, error) {
	if c.remote == nil {
		return nil, fmt.Errorf("%s: not cached and no store: %w", key, store.ErrNotFound)
	}
	b, err := store.GetAtMost(ctx, c.remote, key, max)
	if err != nil {
		return nil, err
	}
	if !intact(key, b) {
		return nil, fmt.Errorf("%s from the store: content does not match its key: %w", key, verify.ErrInvalid)
	}
	if err := c.keep(key, b); err != nil {
		c.writeFailed(key, err)
	}
	return b, nil
}

// writeFailed counts a copy of key that could not be kept, and logs the
// first.
func (c *Cache) writeFailed(key string, err error) {
	c.writeErrors.Add(1)
	if c.warned.CompareAndSwap(false, true) {
		c.log.Warn("metadata cache: cannot keep a local copy; reads go on from the store "+
			"(logged once, counted in pinfs_meta_cache_write_errors_total)", "dir", c.dir, "key", key, "err", err)
	}
}

// keep writes b under key atomically, replacing a bad copy.
func (c *Cache) keep(key string, b []byte) error {
	p, err := c.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// intact reports whether b is the blob its key names: a member table
// hashes to the SHA-256 in its key, a manifest passes the digest rule for
// the digest in its key. Outboards cannot be checked alone and pass.
func intact(key string, b []byte) bool {
	if h, ok := strings.CutPrefix(key, "members/sha256/"); ok {
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:]) == h
	}
	if h, ok := strings.CutPrefix(key, "manifests/sha256/"); ok {
		_, err := verify.ParseManifest(verify.Digest("sha256:"+h), b)
		return err == nil
	}
	return true
}
