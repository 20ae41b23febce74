// Package dial turns a --store value into a store.Store.
//
//   - s3://bucket/prefix: the store's blobs and CAS members live in that
//     bucket under prefix; members are read by version through the same
//     S3 client, in whatever bucket they are.
//   - http(s)://host[:port][/prefix]: a read-only store that reads
//     content through a tier of HTTP caches in front of a pinfs origin
//     (store/httpstore); it creates no S3 client and needs no credentials.
//   - /dir, ./dir, dir or file:///dir: a local directory holds the blobs
//     and CAS members. A manifest kept there may still name members in S3:
//     those are read through an S3 client that is created on first use, so
//     a local store whose members are all in its CAS needs no AWS
//     configuration at all.
package dial

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/httpstore"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/store/s3store"
)

// Open returns the store named by raw (see the package documentation).
func Open(ctx context.Context, raw string) (store.Store, error) {
	switch {
	case raw == "":
		return nil, fmt.Errorf("dial: empty store URL")
	case strings.HasPrefix(raw, "s3://"):
		bucket, prefix, _ := strings.Cut(strings.TrimPrefix(raw, "s3://"), "/")
		if bucket == "" {
			return nil, fmt.Errorf("dial: %q: no bucket", raw)
		}
		c, err := s3store.NewClient(ctx)
		if err != nil {
			return nil, fmt.Errorf("dial: %s: %w", raw, err)
		}
		b, err := s3store.NewBucket(c, bucket, prefix)
		if err != nil {
			return nil, fmt.Errorf("dial: %w", err)
		}
		return b, nil
	case strings.HasPrefix(raw, "http://") || strings.HasPrefix(raw, "https://"):
		// A tier or an origin: no S3 client, no credentials.
		return httpstore.New(raw)
	case strings.HasPrefix(raw, "file:"):
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("dial: %w", err)
		}
		if u.Host != "" && u.Host != "localhost" || !strings.HasPrefix(u.Path, "/") {
			return nil, fmt.Errorf("dial: %q: want file:///absolute/dir", raw)
		}
		return openLocal(u.Path)
	case strings.Contains(raw, "://"):
		return nil, fmt.Errorf("dial: %q: unsupported store URL (want s3://bucket/prefix, http(s)://tier, a directory or file:///dir)", raw)
	}
	return openLocal(raw)
}

// OpenLister returns a Lister of S3 source buckets, for pinning.
func OpenLister(ctx context.Context) (store.Lister, error) {
	c, err := s3store.NewClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	return c, nil
}

func openLocal(dir string) (store.Store, error) {
	ls, err := localstore.New(dir)
	if err != nil {
		return nil, err
	}
	return &local{Store: ls, s3: lazyClient{newClient: s3store.NewClient}}, nil
}

var _ store.Store = (*local)(nil)

// local is a local store whose S3 members are read through a lazily
// created S3 client; CAS members and blobs are the local store's.
type local struct {
	*localstore.Store
	s3 lazyClient
}

// LocalCAS reports that the store's content-addressed members are files
// on this machine.
func (l *local) LocalCAS() bool { return true }

// ReadRange reads CAS members locally and S3 members through S3.
func (l *local) ReadRange(ctx context.Context, obj store.Object, off, length int64) (io.ReadCloser, error) {
	if obj.CAS != "" || obj.Validate() != nil {
		return l.Store.ReadRange(ctx, obj, off, length)
	}
	c, err := l.s3.get(ctx)
	if err != nil {
		return nil, err
	}
	return c.ReadRange(ctx, obj, off, length)
}

// Stat stats CAS members locally and S3 members through S3.
func (l *local) Stat(ctx context.Context, obj store.Object) (store.Info, error) {
	if obj.CAS != "" || obj.Validate() != nil {
		return l.Store.Stat(ctx, obj)
	}
	c, err := l.s3.get(ctx)
	if err != nil {
		return store.Info{}, err
	}
	return c.Stat(ctx, obj)
}

// lazyClient creates an S3 client on first use. A failed creation is not
// remembered, so a later call (say, after a canceled context) tries again.
// Callers wait for one another while a client is being created, which
// reads configuration but sends no request.
type lazyClient struct {
	newClient func(context.Context) (*s3store.Client, error)

	mu sync.Mutex
	c  *s3store.Client
}

func (l *lazyClient) get(ctx context.Context) (*s3store.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c == nil {
		c, err := l.newClient(ctx)
		if err != nil {
			return nil, fmt.Errorf("dial: S3 client for the store's S3 members: %w", err)
		}
		l.c = c
	}
	return l.c, nil
}
