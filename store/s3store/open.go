package s3store

import (
	"context"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pinfs/pinfs/store"
)

// Open returns a reader of the blob at key (its current version, as Get
// reads it) and its size, -1 when the response does not say, so that a
// large blob (a member table) can be read without holding it whole. A
// body shorter than its Content-Length fails with io.ErrUnexpectedEOF.
func (b *Bucket) Open(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	k, err := b.objectKey(key)
	if err != nil {
		return nil, 0, err
	}
	return b.openBlob(ctx, k, store.MaxBlob(key))
}

// openBlob GETs the current version of the store key k (from objectKey)
// as a stream: getBlob without reading the body. A Content-Length beyond
// max is refused; the caller bounds a body of unknown length.
func (b *Bucket) openBlob(ctx context.Context, k string, max int64) (io.ReadCloser, int64, error) {
	out, err := b.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(k)})
	if err != nil {
		return nil, 0, mapErr("get", b.where(k), err)
	}
	n := int64(-1)
	if out.ContentLength != nil {
		n = *out.ContentLength
	}
	if n > max {
		out.Body.Close()
		return nil, 0, fmt.Errorf("s3store: get %s: %w", b.where(k), store.TooLarge("", max))
	}
	return store.ExactReader(out.Body, n), n, nil
}
