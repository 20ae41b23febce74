package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// put stores data at bucket/key and returns the version id.
func put(ctx context.Context, c *s3.Client, bucket, key string, data []byte) (string, error) {
	out, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		return "", fmt.Errorf("put %s/%s: %w", bucket, key, err)
	}
	if aws.ToString(out.VersionId) == "" {
		return "", fmt.Errorf("put %s/%s: no version id", bucket, key)
	}
	return aws.ToString(out.VersionId), nil
}

// getRange reads bytes [off, off+n) of bucket/key at version (the whole
// object when n < 0) into buf (grown as needed) and returns the count.
func getRange(ctx context.Context, c *s3.Client, bucket, key, version string, off, n int64, buf []byte) (int64, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: aws.String(version)}
	if n >= 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	}
	out, err := c.GetObject(ctx, in)
	if err != nil {
		return 0, err
	}
	defer out.Body.Close()
	if got := aws.ToString(out.VersionId); got != version {
		return 0, fmt.Errorf("%s: got version %q, want %q", key, got, version)
	}
	var total int64
	for {
		k, err := out.Body.Read(buf)
		total += int64(k)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return total, err
		}
	}
	if n >= 0 && total != n {
		return total, fmt.Errorf("%s: range %d+%d: read %d bytes", key, off, n, total)
	}
	return total, nil
}

// parallel runs f(i) for i in [0, n) on workers goroutines and returns
// the first error.
func parallel(n, workers int, f func(i int, buf []byte) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range workers {
		wg.Go(func() {
			buf := make([]byte, 1<<20)
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i, buf); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					next.Store(int64(n)) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// rawParallelGET reads size bytes of bucket/key@version as parts of
// part bytes with streams parallel ranged GETs and returns the wall time.
func rawParallelGET(ctx context.Context, c *s3.Client, bucket, key, version string, size, part int64, streams int) (time.Duration, error) {
	nparts := int((size + part - 1) / part)
	start := time.Now()
	err := parallel(nparts, streams, func(i int, buf []byte) error {
		off := int64(i) * part
		_, err := getRange(ctx, c, bucket, key, version, off, min(part, size-off), buf)
		return err
	})
	return time.Since(start), err
}

// randomGETs sends ranged GETs of bs bytes at random bs-aligned offsets
// of bucket/key@version from workers goroutines for d and returns the
// number of requests and their latencies (request sent to body read).
func randomGETs(ctx context.Context, c *s3.Client, bucket, key, version string, size, bs int64, workers int, d time.Duration) ([]time.Duration, time.Duration, error) {
	var mu sync.Mutex
	var lat []time.Duration
	var first error
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 42))
			buf := make([]byte, 1<<20)
			var mine []time.Duration
			for time.Now().Before(deadline) {
				off := r.Int64N(size/bs) * bs
				t0 := time.Now()
				if _, err := getRange(ctx, c, bucket, key, version, off, bs, buf); err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return lat, time.Since(start), first
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// percentile returns the p-th percentile (0..100) of ds (sorted in place).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(float64(len(ds))*p/100+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}
