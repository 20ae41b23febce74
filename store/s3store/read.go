package s3store

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pinfs/pinfs/store"
)

// version is an S3 member object at an exact version id. Only pin makes
// one, from an Object that validates, so a version never has an empty or
// "null" id.
type version struct {
	bucket, key, id string
}

// pin checks that obj names an S3 object at a real version.
func pin(obj store.Object) (version, error) {
	if err := obj.Validate(); err != nil {
		return version{}, fmt.Errorf("s3store: %w", err)
	}
	if obj.CAS != "" {
		return version{}, fmt.Errorf("s3store: %v is a content-addressed blob, not an S3 object", obj)
	}
	return version{obj.Bucket, obj.Key, obj.VersionID}, nil
}

func (v version) String() string {
	return fmt.Sprintf("s3://%s/%s?versionId=%s", v.bucket, v.key, v.id)
}

// checkVersion reports store.ErrVersionMismatch unless the answer carried
// exactly the pinned version id (a missing id does not match either).
func (v version) checkVersion(op string, got *string) error {
	if aws.ToString(got) != v.id {
		return fmt.Errorf("s3store: %s %v: answered with version %q: %w", op, v, aws.ToString(got), store.ErrVersionMismatch)
	}
	return nil
}

// oneAttempt turns the SDK's retries off for one operation.
func oneAttempt(o *s3.Options) { o.RetryMaxAttempts = 1 }

// getVersion GETs v (rng: an HTTP Range value, or "" for all of it). It is
// the only GET of a member object: it always sends the version id and
// checks the one that comes back. The caller closes the body.
//
// A ranged GET makes one attempt: the block reader (store/blocks), which
// asks for ranges, is the one retry layer of the read path (it resumes cut
// bodies and slows every fetch down when the store throttles), and SDK
// retries under it would multiply its requests. A GET of the whole object
// (pin, verify) keeps the SDK's retries.
func (c *Client) getVersion(ctx context.Context, v version, rng string) (*s3.GetObjectOutput, error) {
	in := &s3.GetObjectInput{
		Bucket:    aws.String(v.bucket),
		Key:       aws.String(v.key),
		VersionId: aws.String(v.id),
	}
	var opts []func(*s3.Options)
	if rng != "" {
		in.Range = aws.String(rng)
		opts = append(opts, oneAttempt)
	}
	var out *s3.GetObjectOutput
	var err error
	c.workers.do(func() { out, err = c.api.GetObject(ctx, in, opts...) })
	if err != nil {
		return nil, mapErr("get", v.String(), err)
	}
	if err := v.checkVersion("get", out.VersionId); err != nil {
		out.Body.Close()
		return nil, err
	}
	return out, nil
}

// headVersion HEADs v. It is the only HEAD of a member object: it always
// sends the version id and checks the one that comes back.
func (c *Client) headVersion(ctx context.Context, v version) (*s3.HeadObjectOutput, error) {
	out, err := c.api.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket:    aws.String(v.bucket),
		Key:       aws.String(v.key),
		VersionId: aws.String(v.id),
	})
	if err != nil {
		return nil, mapErr("head", v.String(), err)
	}
	if err := v.checkVersion("head", out.VersionId); err != nil {
		return nil, err
	}
	return out, nil
}

// ReadRange returns length bytes of obj from off (length < 0: to the end)
// with one GET of its pinned version. An off beyond the end is an error,
// and so is off at the end with length > 0 (S3 answers InvalidRange). The
// reader reports io.ErrUnexpectedEOF if the body ends before length bytes
// (or before its Content-Length when length < 0), which includes a range
// that runs past the end of the object.
func (c *Client) ReadRange(ctx context.Context, obj store.Object, off, length int64) (io.ReadCloser, error) {
	v, err := pin(obj)
	if err != nil {
		return nil, err
	}
	if off < 0 || length > 0 && off > math.MaxInt64-length {
		return nil, fmt.Errorf("s3store: read %v: bad range %d+%d", v, off, length)
	}
	if length == 0 {
		// No empty Range exists; check the object and the offset instead.
		return c.emptyAt(ctx, v, off)
	}
	var rng string
	switch {
	case length > 0:
		rng = fmt.Sprintf("bytes=%d-%d", off, off+length-1)
	case off > 0:
		rng = fmt.Sprintf("bytes=%d-", off)
	}
	out, err := c.getVersion(ctx, v, rng)
	if isCode(err, "InvalidRange") && length < 0 {
		// S3 refuses "bytes=size-"; reading from the very end is empty.
		return c.emptyAt(ctx, v, off)
	}
	if err != nil {
		return nil, err
	}
	if rng != "" {
		// A server or proxy that ignores Range would hand back the wrong bytes.
		if want := fmt.Sprintf("bytes %d-", off); !strings.HasPrefix(aws.ToString(out.ContentRange), want) {
			out.Body.Close()
			return nil, fmt.Errorf("s3store: read %v: asked for %s, got Content-Range %q: %w",
				v, rng, aws.ToString(out.ContentRange), store.ErrBadResponse)
		}
	}
	n := length
	if n < 0 && out.ContentLength != nil {
		n = *out.ContentLength
	}
	return store.ExactReader(out.Body, n), nil
}

// emptyAt returns an empty reader if off is at most the size of v.
func (c *Client) emptyAt(ctx context.Context, v version, off int64) (io.ReadCloser, error) {
	out, err := c.headVersion(ctx, v)
	if err != nil {
		return nil, err
	}
	if size := aws.ToInt64(out.ContentLength); off > size {
		return nil, fmt.Errorf("s3store: read %v: offset %d beyond size %d", v, off, size)
	}
	return io.NopCloser(strings.NewReader("")), nil
}

// Stat returns the size and ETag of obj at its pinned version.
func (c *Client) Stat(ctx context.Context, obj store.Object) (store.Info, error) {
	v, err := pin(obj)
	if err != nil {
		return store.Info{}, err
	}
	out, err := c.headVersion(ctx, v)
	if err != nil {
		return store.Info{}, err
	}
	return store.Info{Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag)}, nil
}
