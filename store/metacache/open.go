package metacache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

// membersPrefix is the key prefix of member tables, the blobs Open streams.
const membersPrefix = "members/sha256/"

// Open returns a reader of the blob under key and its size in bytes (-1
// when unknown), for verify.Load to stream a member table without holding
// it whole (Cache is a verify.Opener).
//
// A member table's local copy is returned as it is, unchecked: its reader
// checks it (verify hashes the table as it parses it, and reads it again
// through Get, which replaces a bad copy, when it does not match). A
// member table that is not cached is streamed from the store when the
// store can (it is a verify.Opener) and kept as it is read: the copy
// becomes the local one at the end of the table, and only if it hashes to
// its key; otherwise the reader fails there. Other blobs are read whole
// through Get.
func (c *Cache) Open(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	return c.open(ctx, key, true)
}

// OpenNoCopy is Open without keeping a copy of a member table streamed
// from the store: verify.Fetch uses it for a table it indexes (the index
// holds all that the table says, in less than half its bytes, so a copy
// of the table too would only double what a first mount writes). A local
// copy already there is still read.
func (c *Cache) OpenNoCopy(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	return c.open(ctx, key, false)
}

// open is Open, keeping a copy of a streamed member table when keep.
func (c *Cache) open(ctx context.Context, key string, keep bool) (io.ReadCloser, int64, error) {
	h, ok := strings.CutPrefix(key, membersPrefix)
	if !ok {
		return c.openWhole(ctx, key)
	}
	p, err := c.path(key)
	if err != nil {
		return nil, 0, err
	}
	if f, fi, err := store.OpenRegular(p, os.O_RDONLY, 0); err == nil {
		return f, fi.Size(), nil
	}
	o, ok := c.remote.(verify.Opener)
	if !ok {
		return c.openWhole(ctx, key)
	}
	rc, size, err := o.Open(ctx, key)
	if err != nil || !keep {
		return rc, size, err
	}
	k := &keeper{c: c, key: key, path: p, want: h, rc: rc, h: sha256.New()}
	k.start()
	return k, size, nil
}

// openWhole is Open through Get.
func (c *Cache) openWhole(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	b, err := c.Get(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}

// keeper reads a member table from the store, hashes it and writes it to
// a temporary file that becomes the local copy at its end if it is intact.
type keeper struct {
	c         *Cache
	key, path string
	want      string // hex SHA-256 the table must hash to
	rc        io.ReadCloser
	h         hash.Hash
	f         *os.File // nil once writing failed or ended
	err       error    // the error at the end of the table, once reached
}

// start creates the temporary file; a failure is counted and the table is
// read on without keeping it.
func (k *keeper) start() {
	dir := filepath.Dir(k.path)
	err := os.MkdirAll(dir, 0o700)
	if err == nil {
		k.f, err = os.CreateTemp(dir, ".tmp-*")
	}
	if err != nil {
		k.c.writeFailed(k.key, err)
	}
}

func (k *keeper) Read(p []byte) (int, error) {
	if k.err != nil {
		return 0, k.err
	}
	n, err := k.rc.Read(p)
	k.h.Write(p[:n])
	if k.f != nil && n > 0 {
		if _, werr := k.f.Write(p[:n]); werr != nil {
			k.drop(werr)
		}
	}
	if errors.Is(err, io.EOF) {
		k.err = k.end()
		return n, k.err
	}
	return n, err
}

// end checks the table read and keeps it; it returns io.EOF, or the
// error of a table that does not match its key.
func (k *keeper) end() error {
	if got := hex.EncodeToString(k.h.Sum(nil)); got != k.want {
		k.discard()
		return fmt.Errorf("%s from the store: content does not match its key: %w", k.key, verify.ErrInvalid)
	}
	if k.f != nil {
		f := k.f
		k.f = nil
		err := f.Close()
		if err == nil {
			err = os.Rename(f.Name(), k.path)
		}
		if err != nil {
			os.Remove(f.Name())
			k.c.writeFailed(k.key, err)
		}
	}
	return io.EOF
}

// drop gives up keeping the table after a write error.
func (k *keeper) drop(err error) {
	k.discard()
	k.c.writeFailed(k.key, err)
}

// discard removes the temporary file.
func (k *keeper) discard() {
	if k.f != nil {
		k.f.Close()
		os.Remove(k.f.Name())
		k.f = nil
	}
}

// Close closes the store's reader and removes the copy of a table that
// was not read to its end.
func (k *keeper) Close() error {
	k.discard()
	return k.rc.Close()
}

var _ verify.Opener = (*Cache)(nil)
