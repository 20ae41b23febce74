package s3store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/pinfs/pinfs/store"
)

const (
	// DefaultListParallel is how many sub-prefixes ListCurrent lists at
	// once when Client.ListParallel is 0.
	DefaultListParallel = 16
	// maxLevels bounds how many delimiter listings walk makes down a chain
	// of single sub-prefixes before it lists the last one sequentially.
	maxLevels = 4
	// delimiter splits the key space into sub-prefixes.
	delimiter = "/"
)

// listing collects the current versions of one ListCurrent call. Its
// methods may run concurrently; add takes mu.
type listing struct {
	api    *s3.Client
	bucket string

	mu    sync.Mutex
	list  []store.ObjectVersion
	nulls []string // keys whose current version is "null"
}

// add keeps the current versions of a page, leaving out zero-byte
// directory markers. A key whose current version is a delete marker has no
// version with IsLatest, so it is left out too.
func (l *listing) add(vs []types.ObjectVersion) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range vs {
		key, size := aws.ToString(v.Key), aws.ToInt64(v.Size)
		if !aws.ToBool(v.IsLatest) || strings.HasSuffix(key, "/") && size == 0 {
			continue
		}
		if id := aws.ToString(v.VersionId); id == "" || id == "null" {
			l.nulls = append(l.nulls, key)
			continue
		}
		l.list = append(l.list, store.ObjectVersion{
			Key:       key,
			VersionID: aws.ToString(v.VersionId),
			Size:      size,
			ETag:      aws.ToString(v.ETag),
		})
	}
}

// flat lists every version under prefix, page after page: the sequential
// listing, and the listing of each sub-prefix walk fans out to.
func (l *listing) flat(ctx context.Context, prefix string) error {
	_, err := l.pages(ctx, prefix, "")
	return err
}

// pages lists the versions under prefix with delim ("" for none), adds
// them, and returns the common prefixes found, sorted and unique (a server
// may repeat an entry across pages).
func (l *listing) pages(ctx context.Context, prefix, delim string) ([]string, error) {
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(l.bucket), Prefix: aws.String(prefix)}
	if delim != "" {
		in.Delimiter = aws.String(delim)
	}
	var subs []string
	for {
		page, err := l.api.ListObjectVersions(ctx, in)
		if err != nil {
			return nil, mapErr("list versions of", "s3://"+l.bucket+"/"+prefix, err)
		}
		l.add(page.Versions)
		for _, cp := range page.CommonPrefixes {
			subs = append(subs, aws.ToString(cp.Prefix))
		}
		if !aws.ToBool(page.IsTruncated) {
			break
		}
		key, id := aws.ToString(page.NextKeyMarker), aws.ToString(page.NextVersionIdMarker)
		if key == aws.ToString(in.KeyMarker) && id == aws.ToString(in.VersionIdMarker) {
			// versitygw v1.8.0 does this when a page ends on a directory
			// object: it would repeat the same page forever.
			return nil, fmt.Errorf("s3store: list versions of s3://%s/%s: the server answers the page after %q/%q with itself",
				l.bucket, prefix, key, id)
		}
		in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
	}
	slices.Sort(subs)
	return slices.Compact(subs), nil
}

// walk lists prefix in parallel where the key space allows it. A listing
// with Delimiter "/" yields the versions directly at that level and the
// sub-prefixes below it. With two or more sub-prefixes, each is listed
// sequentially, up to n at once; with one, walk descends into it, for up
// to maxLevels delimiter listings, after which it lists the last one
// sequentially; with none, the delimiter listing was the whole listing.
//
// The union is the sequential listing: every key under prefix either has
// no "/" after the prefix (listed at that level) or falls under exactly
// one common prefix (its text up to and including the first "/" after the
// prefix), which keeps keys ending in "/" and empty segments ("a//b") in
// their place.
func (l *listing) walk(ctx context.Context, prefix string, n int) error {
	for level := 1; ; level++ {
		subs, err := l.pages(ctx, prefix, delimiter)
		switch {
		case err != nil:
			return err
		case len(subs) == 0:
			return nil
		case len(subs) == 1 && level < maxLevels:
			prefix = subs[0]
		case len(subs) == 1:
			return l.flat(ctx, subs[0])
		default:
			return l.fan(ctx, subs, n)
		}
	}
}

// fan lists each of prefixes sequentially, up to n at once, and returns
// the first error (which cancels the listings still running).
func (l *listing) fan(ctx context.Context, prefixes []string, n int) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(n, len(prefixes)) {
		wg.Go(func() {
			for p := range work {
				if err := l.flat(ctx, p); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for _, p := range prefixes {
		select {
		case work <- p:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	return context.Cause(ctx)
}
