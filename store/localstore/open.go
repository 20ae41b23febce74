package localstore

import (
	"context"
	"fmt"
	"github.com/pinfs/pinfs/store"
	"io"
	"os"
)

// Open returns a reader of the blob at key and its size, so that a large
// blob (a member table) can be read without holding it whole. The blob
// must be a regular file of at most store.MaxBlob(key) bytes (see
// GetAtMost).
func (s *Store) Open(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	p, err := s.path(key)
	if err != nil {
		return nil, 0, err
	}
	f, fi, err := store.OpenRegular(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("localstore: open %s: %w", key, mapErr(err))
	}
	if max := store.MaxBlob(key); fi.Size() > max {
		f.Close()
		return nil, 0, fmt.Errorf("localstore: open %s: %w", key, store.TooLarge(p, max))
	}
	return f, fi.Size(), nil
}
