package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/b3"
)

const (
	// minPartSize is the part size of multipart CAS uploads, and the size
	// up to which a CAS blob is sent with one PutObject. Each PutCAS holds
	// one part in memory, which makes every request body seekable (signed,
	// and retryable by the SDK).
	minPartSize = 16 << 20
	// maxParts is S3's limit on the parts of one upload.
	maxParts = 10000
	// abortTimeout bounds the cleanup of a failed multipart upload, which
	// runs even when the caller's context is done.
	abortTimeout = 30 * time.Second
)

var (
	_ store.Store   = (*Bucket)(nil)
	_ store.Creator = (*Bucket)(nil)
)

// Bucket is a pinfs store kept at s3://bucket/prefix: metadata blobs at
// prefix/<key> and CAS member bytes at prefix/cas/blake3/<hex>. Its
// ReadRange, Stat and ListCurrent are the Client's: members are read by
// version, wherever they live. It is safe for concurrent use.
//
// Get, Put and the existence check of PutCAS address the store's own keys
// without a version id. That is the one place that does: those keys are
// content addressed, their readers verify them, and they are never pinned
// members (a member stored by PutCAS is pinned at the version its upload
// created).
type Bucket struct {
	*Client
	bucket, prefix string

	partSize int64 // minPartSize; smaller in tests
}

// NewBucket returns the store at s3://bucket/prefix, reached through c.
// Leading and trailing slashes of prefix are ignored; an empty prefix is
// the bucket's root.
func NewBucket(c *Client, bucket, prefix string) (*Bucket, error) {
	if bucket == "" || strings.Contains(bucket, "/") {
		return nil, fmt.Errorf("s3store: bad bucket name %q", bucket)
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		if err := store.CheckKey(prefix); err != nil {
			return nil, fmt.Errorf("s3store: store prefix: %w", err)
		}
	}
	return &Bucket{Client: c, bucket: bucket, prefix: prefix, partSize: minPartSize}, nil
}

// String returns s3://bucket/prefix.
func (b *Bucket) String() string {
	return "s3://" + b.bucket + "/" + b.prefix
}

// objectKey returns the S3 key of the store blob key.
func (b *Bucket) objectKey(key string) (string, error) {
	if err := store.CheckKey(key); err != nil {
		return "", fmt.Errorf("s3store %s: %w", b, err)
	}
	if b.prefix == "" {
		return key, nil
	}
	return b.prefix + "/" + key, nil
}

func (b *Bucket) where(k string) string { return "s3://" + b.bucket + "/" + k }

// getBlob GETs the current version of the store key k (from objectKey) and
// returns its bytes and ETag, if it holds at most max bytes: a larger
// Content-Length is refused before the body is read, and a body that runs
// on beyond max anyway once max+1 bytes have come (store.ReadAtMost). It
// must never be used for a member object.
func (b *Bucket) getBlob(ctx context.Context, k string, max int64) ([]byte, string, error) {
	out, err := b.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(k)})
	if err != nil {
		return nil, "", mapErr("get", b.where(k), err)
	}
	defer out.Body.Close()
	n := int64(-1)
	if out.ContentLength != nil {
		n = *out.ContentLength
	}
	data, err := store.ReadAtMost(store.ExactReader(out.Body, n), n, max, "")
	if err != nil {
		return nil, "", fmt.Errorf("s3store: get %s: %w", b.where(k), err)
	}
	return data, aws.ToString(out.ETag), nil
}

// headBlob HEADs the current version of the store key k (from objectKey).
// It must never be used for a member object.
func (b *Bucket) headBlob(ctx context.Context, k string) (*s3.HeadObjectOutput, error) {
	out, err := b.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(k)})
	if err != nil {
		return nil, mapErr("head", b.where(k), err)
	}
	return out, nil
}

// Get returns the blob at key: GetAtMost with store.MaxBlob(key).
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	return b.GetAtMost(ctx, key, store.MaxBlob(key))
}

// GetAtMost returns the blob at key if it holds at most max bytes (see
// getBlob).
func (b *Bucket) GetAtMost(ctx context.Context, key string, max int64) ([]byte, error) {
	k, err := b.objectKey(key)
	if err != nil {
		return nil, err
	}
	data, _, err := b.getBlob(ctx, k, max)
	return data, err
}

// Put stores data at key unless it is there already. Blobs are content
// addressed, so an existing key must hold exactly data: if it holds other
// bytes Put fails and leaves them. The upload is conditional
// (If-None-Match: *), so that of two racing writers one loses and
// compares instead of overwriting.
func (b *Bucket) Put(ctx context.Context, key string, data []byte) error {
	k, err := b.objectKey(key)
	if err != nil {
		return err
	}
	switch err := b.sameBlob(ctx, k, data); {
	case err == nil:
		return nil
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	// put uploads data, only if the key is absent when ifAbsent. Each call
	// has its own body: a reader consumed by one PutObject is not rewound
	// for the next.
	put := func(ifAbsent bool) error {
		in := &s3.PutObjectInput{
			Bucket:        aws.String(b.bucket),
			Key:           aws.String(k),
			Body:          bytes.NewReader(data),
			ContentLength: aws.Int64(int64(len(data))),
		}
		if ifAbsent {
			in.IfNoneMatch = aws.String("*")
		}
		_, err := b.api.PutObject(ctx, in)
		return err
	}
	err = put(true)
	if isCode(err, "NotImplemented") {
		// A server without conditional writes: the check above must do.
		err = put(false)
	}
	if isCode(err, "PreconditionFailed", "ConditionalRequestConflict") {
		// Another writer won the race; it must have written the same bytes.
		err = b.sameBlob(ctx, k, data)
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		// Nothing there after all: the current version is a delete marker,
		// which some servers (versitygw) count as existing. Nothing to
		// overwrite, so write without the condition.
		err = put(false)
	}
	if err != nil {
		return mapErr("put", b.where(k), err)
	}
	return nil
}

// Create stores data at key only if key does not exist, with one
// conditional PutObject (If-None-Match: *). An existing key fails with an
// error wrapping store.ErrExist. Where the condition cannot be had it
// fails with an error wrapping store.ErrNotExclusive and writes nothing:
// a server that answers NotImplemented, or a current delete marker that
// the server counts as existing (versitygw does). It never falls back to
// an unconditional PUT, as Put does for content-addressed keys.
func (b *Bucket) Create(ctx context.Context, key string, data []byte) error {
	k, err := b.objectKey(key)
	if err != nil {
		return err
	}
	_, err = b.api.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(b.bucket),
		Key:           aws.String(k),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		IfNoneMatch:   aws.String("*"),
	})
	switch {
	case err == nil:
		return nil
	case isCode(err, "NotImplemented"):
		return fmt.Errorf("s3store: create %s: the server does not implement conditional writes (If-None-Match): %w",
			b.where(k), store.ErrNotExclusive)
	case isCode(err, "PreconditionFailed", "ConditionalRequestConflict"):
		_, herr := b.headBlob(ctx, k)
		switch {
		case herr == nil:
			return fmt.Errorf("s3store: create %s: %w", b.where(k), store.ErrExist)
		case errors.Is(herr, store.ErrNotFound) && isCode(err, "PreconditionFailed"):
			return fmt.Errorf("s3store: create %s: its current version is a delete marker, which the server counts as existing: %w",
				b.where(k), store.ErrNotExclusive)
		case errors.Is(herr, store.ErrNotFound):
			return mapErr("create", b.where(k), err) // a concurrent write in flight: try again
		}
		return herr
	}
	return mapErr("create", b.where(k), err)
}

// sameBlob returns nil if the store key k holds exactly data, an error
// wrapping store.ErrNotFound if it does not exist, and another error if it
// holds other bytes. It HEADs first, so a blob of another size is not
// downloaded.
func (b *Bucket) sameBlob(ctx context.Context, k string, data []byte) error {
	head, err := b.headBlob(ctx, k)
	if err != nil {
		return err
	}
	if aws.ToInt64(head.ContentLength) == int64(len(data)) {
		old, _, err := b.getBlob(ctx, k, int64(len(data)))
		if err != nil {
			return err
		}
		if bytes.Equal(old, data) {
			return nil
		}
	}
	return fmt.Errorf("s3store: put %s: the key already holds different bytes; "+
		"a content-addressed key must never change (corrupt store?)", b.where(k))
}

// PutCAS uploads size bytes from r to prefix/cas/blake3/<hex> and returns
// that key at the version the upload created. It hashes the bytes as it
// sends them and commits the upload (the PutObject, or the completion of a
// multipart upload) only if r yields exactly size bytes that hash to
// digest; otherwise it sends nothing or aborts the upload, and fails
// (bytes of another digest: an error wrapping b3.ErrMismatch).
//
// If the key's current version has the same size and a real version id,
// PutCAS reads that version (by its id) and hashes it: if it holds the
// bytes of digest, r is not read and that version is returned; if not, a
// new version is uploaded over it. This HEAD by key is on the store's own
// CAS key, never on a pinned member.
//
// The store bucket must have versioning enabled: otherwise the bytes could
// not be pinned, and PutCAS fails with an error wrapping
// store.ErrUnversioned.
func (b *Bucket) PutCAS(ctx context.Context, digest string, r io.Reader, size int64) (store.Object, error) {
	cas, err := store.NewCAS(digest)
	if err != nil {
		return store.Object{}, fmt.Errorf("s3store: put cas: %w", err)
	}
	if size < 0 {
		return store.Object{}, fmt.Errorf("s3store: put %v: negative size %d", cas, size)
	}
	want, err := b3.Parse(digest)
	if err != nil {
		return store.Object{}, fmt.Errorf("s3store: put cas: %w", err)
	}
	key, err := store.CASKey(cas)
	if err != nil {
		return store.Object{}, err
	}
	k, err := b.objectKey(key)
	if err != nil {
		return store.Object{}, err
	}
	switch obj, err := b.currentCAS(ctx, k, want, size); {
	case err == nil:
		return obj, nil
	case !errors.Is(err, store.ErrNotFound) && !errors.Is(err, b3.ErrMismatch):
		return store.Object{}, err
	}

	var id *string
	if size <= b.partSize {
		id, err = b.putSmall(ctx, k, r, size, want)
	} else {
		id, err = b.putMultipart(ctx, k, r, size, want)
	}
	if err != nil {
		return store.Object{}, err
	}
	obj, err := store.NewVersion(b.bucket, k, aws.ToString(id))
	if err != nil {
		return store.Object{}, b.noVersion(ctx, k, err)
	}
	return obj, nil
}

// currentCAS returns the current version of the CAS key k if it holds
// size bytes that hash to want. It reports an error wrapping
// store.ErrNotFound if there is no usable current version (none, or
// "null"), one wrapping b3.ErrMismatch if it holds other bytes, and any
// other error as it is.
func (b *Bucket) currentCAS(ctx context.Context, k string, want b3.Sum, size int64) (store.Object, error) {
	head, err := b.headBlob(ctx, k)
	if err != nil {
		return store.Object{}, err
	}
	if aws.ToInt64(head.ContentLength) != size {
		return store.Object{}, fmt.Errorf("s3store: %s holds %d bytes, not %d: %w",
			b.where(k), aws.ToInt64(head.ContentLength), size, b3.ErrMismatch)
	}
	obj, err := store.NewVersion(b.bucket, k, aws.ToString(head.VersionId))
	if err != nil {
		return store.Object{}, fmt.Errorf("s3store: %s: %w: %w", b.where(k), store.ErrNotFound, err)
	}
	rc, err := b.ReadRange(ctx, obj, 0, size)
	if err != nil {
		return store.Object{}, err
	}
	defer rc.Close()
	if err := b3.Check(rc, want); err != nil {
		return store.Object{}, fmt.Errorf("s3store: %v: %w", obj, err)
	}
	return obj, nil
}

// putSmall uploads the size bytes of r to k with one PutObject, if they
// hash to want, and returns the new version id.
func (b *Bucket) putSmall(ctx context.Context, k string, r io.Reader, size int64, want b3.Sum) (*string, error) {
	buf := make([]byte, size)
	if err := readPart(ctx, r, buf, size, 0); err != nil {
		return nil, fmt.Errorf("s3store: put %s: %w", b.where(k), err)
	}
	if err := atEOF(r, size); err != nil {
		return nil, fmt.Errorf("s3store: put %s: %w", b.where(k), err)
	}
	if got := b3.Of(buf); got != want {
		return nil, fmt.Errorf("s3store: put %s: bytes hash to %v: %w", b.where(k), got, b3.ErrMismatch)
	}
	out, err := b.api.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(b.bucket),
		Key:           aws.String(k),
		Body:          bytes.NewReader(buf),
		ContentLength: aws.Int64(size),
	})
	if err != nil {
		return nil, mapErr("put", b.where(k), err)
	}
	return out.VersionId, nil
}

// putMultipart uploads the size bytes of r to k in parts of at least
// b.partSize, one part in memory at a time, hashing them as they go, and
// returns the new version id. It completes the upload only if the bytes
// hash to want; a failed upload is aborted.
func (b *Bucket) putMultipart(ctx context.Context, k string, r io.Reader, size int64, want b3.Sum) (_ *string, err error) {
	partSize := max(b.partSize, (size+maxParts-1)/maxParts)
	created, err := b.api.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(b.bucket),
		Key:    aws.String(k),
	})
	if err != nil {
		return nil, mapErr("start upload of", b.where(k), err)
	}
	defer func() {
		if err == nil {
			return
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
		defer cancel()
		_, aerr := b.api.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket:   aws.String(b.bucket),
			Key:      aws.String(k),
			UploadId: created.UploadId,
		})
		if aerr != nil {
			err = errors.Join(err, mapErr("abort upload of", b.where(k), aerr))
		}
	}()

	buf := make([]byte, partSize)
	h := b3.NewHasher()
	var parts []types.CompletedPart
	for off, n := int64(0), int32(1); off < size; off, n = off+partSize, n+1 {
		part := min(partSize, size-off)
		if err := readPart(ctx, r, buf, part, off); err != nil {
			return nil, fmt.Errorf("s3store: put %s: %w", b.where(k), err)
		}
		h.Write(buf[:part])
		out, err := b.api.UploadPart(ctx, &s3.UploadPartInput{
			Bucket:        aws.String(b.bucket),
			Key:           aws.String(k),
			UploadId:      created.UploadId,
			PartNumber:    aws.Int32(n),
			Body:          bytes.NewReader(buf[:part]),
			ContentLength: aws.Int64(part),
		})
		if err != nil {
			return nil, mapErr(fmt.Sprintf("put part %d of", n), b.where(k), err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)})
	}
	if err := atEOF(r, size); err != nil {
		return nil, fmt.Errorf("s3store: put %s: %w", b.where(k), err)
	}
	if err := h.Check(want); err != nil {
		return nil, fmt.Errorf("s3store: put %s: %w", b.where(k), err)
	}
	done, err := b.api.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(b.bucket),
		Key:             aws.String(k),
		UploadId:        created.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return nil, mapErr("complete upload of", b.where(k), err)
	}
	return done.VersionId, nil
}

// readPart fills buf[:n] from r, which has already yielded off bytes.
func readPart(ctx context.Context, r io.Reader, buf []byte, n, off int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	got, err := io.ReadFull(r, buf[:n])
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("reader ended after %d bytes: %w", off+int64(got), io.ErrUnexpectedEOF)
	}
	return err
}

// atEOF fails if r has more than the size bytes already read from it.
func atEOF(r io.Reader, size int64) error {
	var one [1]byte
	if n, _ := io.ReadFull(r, one[:]); n > 0 {
		return fmt.Errorf("reader has more than the declared %d bytes", size)
	}
	return nil
}
