package localstore

import (
	"context"
	"fmt"
	"io"
	"os"
)

// Open returns a reader of the blob at key and its size, so that a large
// blob (a member table) can be read without holding it whole.
func (s *Store) Open(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	p, err := s.path(key)
	if err != nil {
		return nil, 0, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, 0, fmt.Errorf("localstore: open %s: %w", key, mapErr(err))
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("localstore: open %s: %w", key, err)
	}
	return f, fi.Size(), nil
}
