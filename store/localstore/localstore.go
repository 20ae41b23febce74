// Package localstore implements store.Store on a local directory.
//
// Metadata blobs live at dir/<key> and content-addressed member bytes at
// dir/cas/blake3/<hex>. Every write goes to a temporary file in the target's
// directory, is fsynced and then linked or renamed into place, so a reader
// never sees a partly written blob, and a crash leaves at most a stray
// ".tmp-*" file behind. Content-addressed bytes are hashed as they are
// written and put in place only if they match their digest.
//
// A local store holds only content-addressed members: ReadRange and Stat
// refuse S3 objects. store/dial composes a local store with an S3 client
// when a manifest kept here names members that live in S3.
//
// A Store is safe for concurrent use. Concurrent Puts of the same key with
// the same bytes all succeed; with different bytes, one wins and the others
// fail.
package localstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/b3"
)

var (
	_ store.Store   = (*Store)(nil)
	_ store.Creator = (*Store)(nil)
)

// Store is a store.Store rooted at a directory.
type Store struct {
	dir string // absolute and clean
}

// New returns the store rooted at dir. dir need not exist yet: the first
// Put creates it, and reads from a missing directory report
// store.ErrNotFound. New fails if dir exists and is not a directory.
func New(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("localstore: empty directory name")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("localstore: %w", err)
	}
	fi, err := os.Stat(abs)
	switch {
	case err == nil && !fi.IsDir():
		return nil, fmt.Errorf("localstore: %s is not a directory", abs)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("localstore: %w", err)
	}
	return &Store{dir: abs}, nil
}

// String returns the store's absolute directory.
func (s *Store) String() string { return s.dir }

// path returns the file that holds key, after checking that key stays
// inside the store root.
func (s *Store) path(key string) (string, error) {
	if err := store.CheckKey(key); err != nil {
		return "", fmt.Errorf("localstore %s: %w", s.dir, err)
	}
	return filepath.Join(s.dir, filepath.FromSlash(key)), nil
}

// Get returns the bytes of the blob at key: GetAtMost with
// store.MaxBlob(key).
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	return s.GetAtMost(ctx, key, store.MaxBlob(key))
}

// GetAtMost returns the bytes of the blob at key if it holds at most max.
// The blob must be a regular file: it is opened without following a
// symbolic link and without blocking (a FIFO at key fails at once; see
// store.OpenRegular), and a file larger than max is refused before it is
// read (store.ReadAtMost).
func (s *Store) GetAtMost(ctx context.Context, key string, max int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	data, err := store.ReadRegular(p, max)
	if err != nil {
		return nil, fmt.Errorf("localstore: get %s: %w", key, mapErr(err))
	}
	return data, nil
}

// Put stores data at key. Blobs are content addressed by their callers, so
// Put of an existing key with identical bytes is a no-op, and Put of an
// existing key with different bytes is an error: the store (or the caller's
// addressing) is corrupt, and the old bytes are kept.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := s.path(key)
	if err != nil {
		return err
	}
	same, err := sameBytes(p, data)
	if err == nil {
		if same {
			return nil
		}
		return conflict(key, p)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("localstore: put %s: %w", key, err)
	}
	err = writeFile(p, false, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if errors.Is(err, fs.ErrExist) {
		// Another writer got there first; accept it if it wrote the same.
		if same, err := sameBytes(p, data); err != nil || !same {
			return conflict(key, p)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("localstore: put %s: %w", key, err)
	}
	return nil
}

// Create stores data at key only if key does not exist; an existing key
// fails with an error wrapping store.ErrExist. The bytes are written and
// fsynced in a temporary file that is then linked into place (link(2)
// fails if the key exists), so a reader racing with Create sees either no
// key or all of its bytes, never a short or empty file.
func (s *Store) Create(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := s.path(key)
	if err != nil {
		return err
	}
	err = writeFile(p, false, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("localstore: create %s: %w", key, store.ErrExist)
	}
	if err != nil {
		return fmt.Errorf("localstore: create %s: %w", key, err)
	}
	return nil
}

func conflict(key, p string) error {
	return fmt.Errorf("localstore: put %s: %s already holds different bytes; "+
		"a content-addressed key must never change (corrupt store?)", key, p)
}

// sameBytes reports whether the file at p holds exactly data.
func sameBytes(p string, data []byte) (bool, error) {
	old, err := store.ReadRegular(p, int64(len(data)))
	switch {
	case errors.Is(err, store.ErrTooLarge) || errors.Is(err, store.ErrNotRegular):
		return false, nil
	case err != nil:
		return false, err
	}
	return bytes.Equal(old, data), nil
}

// PutCAS stores size bytes from r at cas/blake3/<hex> and returns the CAS
// Object for digest. It hashes the bytes as it writes them to a temporary
// file and puts that file in place only if r yields exactly size bytes that
// hash to digest; otherwise it fails (bytes of another digest: an error
// wrapping b3.ErrMismatch) and leaves what was there.
//
// A blob already in place is trusted only after it is read and hashed: if
// it holds the bytes of digest, r is not read; a file of another size or
// other bytes is replaced.
func (s *Store) PutCAS(ctx context.Context, digest string, r io.Reader, size int64) (store.Object, error) {
	obj, err := store.NewCAS(digest)
	if err != nil {
		return store.Object{}, fmt.Errorf("localstore: put cas: %w", err)
	}
	want, err := b3.Parse(digest)
	if err != nil {
		return store.Object{}, fmt.Errorf("localstore: put cas: %w", err)
	}
	if size < 0 {
		return store.Object{}, fmt.Errorf("localstore: put %v: negative size %d", obj, size)
	}
	key, err := store.CASKey(obj)
	if err != nil {
		return store.Object{}, err
	}
	p, err := s.path(key)
	if err != nil {
		return store.Object{}, err
	}
	switch err := holds(ctx, p, want, size); {
	case err == nil:
		return obj, nil
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, b3.ErrMismatch):
		return store.Object{}, fmt.Errorf("localstore: put %v: checking the blob in place: %w", obj, err)
	}
	err = writeFile(p, true, func(w io.Writer) error {
		h := b3.NewHasher()
		if err := copyExact(ctx, io.MultiWriter(w, h), r, size); err != nil {
			return err
		}
		return h.Check(want)
	})
	if err != nil {
		return store.Object{}, fmt.Errorf("localstore: put %v: %w", obj, err)
	}
	return obj, nil
}

// holds returns nil if the file at p is a regular file of size bytes that
// hash to want, an error wrapping fs.ErrNotExist if there is none, and one
// wrapping b3.ErrMismatch if it holds anything else.
func holds(ctx context.Context, p string, want b3.Sum, size int64) error {
	f, fi, err := store.OpenRegular(p, os.O_RDONLY, 0)
	if errors.Is(err, store.ErrNotRegular) {
		return fmt.Errorf("%w: %w", b3.ErrMismatch, err)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if fi.Size() != size {
		return fmt.Errorf("%s holds %d bytes, not %d: %w", p, fi.Size(), size, b3.ErrMismatch)
	}
	return b3.Check(ctxReader{ctx, f}, want)
}

// copyExact copies exactly size bytes from r to w and fails if r has fewer
// or more. It stops early when ctx is done.
func copyExact(ctx context.Context, w io.Writer, r io.Reader, size int64) error {
	n, err := io.CopyN(w, ctxReader{ctx, r}, size)
	if err == io.EOF {
		return fmt.Errorf("reader ended after %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)
	}
	if err != nil {
		return err
	}
	var one [1]byte
	if m, _ := io.ReadFull(r, one[:]); m > 0 {
		return fmt.Errorf("reader has more than the declared %d bytes", size)
	}
	return nil
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// writeFile writes a new file at p: fill writes the contents to a temporary
// file in p's directory, which is fsynced and then put in place. With
// replace, it is renamed over whatever is at p. Without, it is hard-linked
// to p, so that an existing file is never clobbered: writeFile then returns
// an error wrapping fs.ErrExist. Where hard links are not supported it falls
// back to a rename after checking that p does not exist.
func writeFile(p string, replace bool, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(p)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if f != nil {
			f.Close()
		}
		os.Remove(tmp) // after a rename this is a no-op ENOENT
	}()
	if err := fill(f); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	err = f.Close()
	f = nil
	if err != nil {
		return err
	}
	if replace {
		err = os.Rename(tmp, p)
	} else if err = os.Link(tmp, p); err != nil && !errors.Is(err, fs.ErrExist) && linkUnsupported(err) {
		if _, serr := os.Lstat(p); serr == nil {
			err = &fs.PathError{Op: "create", Path: p, Err: fs.ErrExist}
		} else {
			err = os.Rename(tmp, p)
		}
	}
	if err != nil {
		return err
	}
	return store.SyncDir(dir)
}

// linkUnsupported reports whether a failed link(2) means the file system
// does not do hard links, rather than a real failure.
func linkUnsupported(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOTSUP) ||
		errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.EXDEV) ||
		errors.Is(err, syscall.EMLINK)
}

// casPath returns the file of a content-addressed member. S3 objects are
// refused: a local store cannot read them.
func (s *Store) casPath(obj store.Object) (string, error) {
	if err := obj.Validate(); err != nil {
		return "", fmt.Errorf("localstore: %w", err)
	}
	if obj.CAS == "" {
		return "", fmt.Errorf("localstore %s: cannot read S3 object %v: a local store "+
			"holds only content-addressed members (store/dial adds an S3 client for S3 members)", s.dir, obj)
	}
	key, err := store.CASKey(obj)
	if err != nil {
		return "", err
	}
	return s.path(key)
}

// ReadRange returns length bytes of the CAS object obj from off (length < 0:
// to the end). An off beyond the end is an error; a file that ends before
// off+length makes the reader report io.ErrUnexpectedEOF.
func (s *Store) ReadRange(ctx context.Context, obj store.Object, off, length int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := s.casPath(obj)
	if err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("localstore: read %v: negative offset %d", obj, off)
	}
	f, fi, err := store.OpenRegular(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("localstore: read %v: %w", obj, mapErr(err))
	}
	size := fi.Size()
	if off > size {
		f.Close()
		return nil, fmt.Errorf("localstore: read %v: offset %d beyond size %d", obj, off, size)
	}
	n := length
	if n < 0 {
		n = size - off
	}
	body := struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, off, n), f}
	return store.ExactReader(body, n), nil
}

// Stat returns the size of the CAS object obj.
func (s *Store) Stat(ctx context.Context, obj store.Object) (store.Info, error) {
	if err := ctx.Err(); err != nil {
		return store.Info{}, err
	}
	p, err := s.casPath(obj)
	if err != nil {
		return store.Info{}, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return store.Info{}, fmt.Errorf("localstore: stat %v: %w", obj, mapErr(err))
	}
	if !fi.Mode().IsRegular() {
		return store.Info{}, fmt.Errorf("localstore: stat %v: %s is not a regular file", obj, p)
	}
	return store.Info{Size: fi.Size()}, nil
}

// mapErr adds store.ErrNotFound to a file error that means "no such blob",
// keeping the original error (with its path) wrapped as well.
func mapErr(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	return err
}
