package s3store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/pinfs/pinfs/store"
)

// maxNamed is how many offending keys an ErrUnversioned error lists.
const maxNamed = 10

// ListCurrent returns the current version of every object under prefix in
// bucket, sorted by key. Keys whose current version is a delete marker are
// left out, and so are zero-byte "directory markers" (keys ending in "/").
//
// The bucket must have versioning Enabled: with versioning off or Suspended
// a new write replaces the "null" version in place, so no listed version
// could be pinned, and ListCurrent fails with store.ErrUnversioned. It fails
// the same way, naming the keys, when a current version is "null" (written
// before versioning was enabled).
//
// Where the key space allows it, the listing runs in parallel (see
// Client.ListParallel and walk); the result is the same as a sequential
// listing's.
func (c *Client) ListCurrent(ctx context.Context, bucket, prefix string) ([]store.ObjectVersion, error) {
	where := fmt.Sprintf("s3://%s/%s", bucket, prefix)
	status, err := c.versioning(ctx, bucket)
	if err != nil {
		return nil, err
	}
	if status != types.BucketVersioningStatusEnabled {
		return nil, unversionedError(bucket, string(status))
	}

	l := &listing{api: c.api, bucket: bucket}
	if n := c.listParallel(); n > 1 {
		err = l.walk(ctx, prefix, n)
	} else {
		err = l.flat(ctx, prefix)
	}
	if err != nil {
		return nil, err
	}
	list, nulls := l.list, l.nulls
	if len(nulls) > 0 {
		slices.Sort(nulls)
		nulls = slices.Compact(nulls) // a server may repeat an entry across pages
		return nil, fmt.Errorf("s3store: %s: %d current versions are %q (written before versioning was enabled; "+
			"copy them onto themselves to give them a version): %s: %w",
			where, len(nulls), "null", nameSome(nulls), store.ErrUnversioned)
	}
	return dedupe(where, list)
}

// versioning returns the versioning status of bucket: Enabled, Suspended,
// or "" when it was never turned on.
func (c *Client) versioning(ctx context.Context, bucket string) (types.BucketVersioningStatus, error) {
	vc, err := c.api.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(bucket)})
	if err != nil {
		return "", mapErr("get versioning of", "s3://"+bucket, err)
	}
	return vc.Status, nil
}

// dedupe sorts a listing by key and drops repeated entries. versitygw
// (v1.8.0) repeats the last version of a page at the start of the next
// one; a key listed with two different current versions is an error.
func dedupe(where string, list []store.ObjectVersion) ([]store.ObjectVersion, error) {
	slices.SortStableFunc(list, func(a, b store.ObjectVersion) int { return strings.Compare(a.Key, b.Key) })
	out := list[:0]
	for _, v := range list {
		if n := len(out); n > 0 && out[n-1].Key == v.Key {
			if out[n-1].VersionID != v.VersionID {
				return nil, fmt.Errorf("s3store: %s: the listing names two current versions of %s (%s and %s)",
					where, v.Key, out[n-1].VersionID, v.VersionID)
			}
			continue
		}
		out = append(out, v)
	}
	return out, nil
}

// nameSome joins up to maxNamed keys and says how many more there are.
func nameSome(keys []string) string {
	if len(keys) <= maxNamed {
		return strings.Join(keys, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(keys[:maxNamed], ", "), len(keys)-maxNamed)
}
