package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// GetAll GETs keys from b, jobs at a time, each at most MaxBlob(key) bytes
// (GetAtMost), and returns their bytes in the order of keys; a key that is
// gone (ErrNotFound) gets nil. It stops at the first other error, and once
// the blobs hold more than total bytes together (TooLarge, naming them as
// "N what together"), canceling the GETs still running.
func GetAll(ctx context.Context, b Blobs, keys []string, jobs int, total int64, what string) ([][]byte, error) {
	out := make([][]byte, len(keys))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		held  atomic.Int64
		mu    sync.Mutex
		first error
	)
	for range min(jobs, len(keys)) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(keys) && ctx.Err() == nil; i = int(next.Add(1)) - 1 {
				data, err := GetAtMost(ctx, b, keys[i], MaxBlob(keys[i]))
				if errors.Is(err, ErrNotFound) {
					continue
				}
				if err == nil && held.Add(int64(len(data))) > total {
					err = TooLarge(fmt.Sprintf("%d %s together", len(keys), what), total)
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("get %s: %w", keys[i], err)
					}
					mu.Unlock()
					cancel()
					return
				}
				out[i] = data
			}
		})
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return out, ctx.Err()
}
