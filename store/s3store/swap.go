package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pinfs/pinfs/store"
)

var (
	_ store.Swapper   = (*Bucket)(nil)
	_ store.KeyLister = (*Bucket)(nil)
)

// Load GETs the current version of the store key and returns its bytes and
// its ETag (quoted, as S3 sends it), both from the one response.
func (b *Bucket) Load(ctx context.Context, key string) ([]byte, string, error) {
	k, err := b.objectKey(key)
	if err != nil {
		return nil, "", err
	}
	data, etag, err := b.getBlob(ctx, k, store.MaxBlob(key))
	if err != nil {
		return nil, "", err
	}
	if etag == "" {
		return nil, "", fmt.Errorf("s3store: load %s: the answer has no ETag, so it cannot be replaced conditionally: %w",
			b.where(k), store.ErrNotExclusive)
	}
	return data, etag, nil
}

// Swap replaces the store key with one conditional PutObject: If-Match:
// rev (an ETag from Load), or If-None-Match: * when rev is "". The server
// decides, atomically per key, whether the write happens; Swap never
// reads, compares and then writes without the condition.
//
// A lost race (412 PreconditionFailed, 409 ConditionalRequestConflict, or
// 404 NoSuchKey to If-Match: the key was deleted) fails with an error
// wrapping store.ErrConflict. A server that answers NotImplemented to the
// condition fails with one wrapping store.ErrNotExclusive, and so does a
// create over a key whose current version is a delete marker, which
// versitygw counts as existing. A server that ignores the condition
// altogether cannot be told apart from one that keeps it; the integration
// tests check versitygw.
//
// The SDK retries a request whose answer was lost; if the first attempt
// was written, the retry is refused. So before it reports a conflict,
// Swap reads the key: if it holds exactly data, the write was Swap's own
// (the gate's records are unique: they name their predecessor and the
// time) and Swap succeeds.
func (b *Bucket) Swap(ctx context.Context, key string, data []byte, rev string) error {
	k, err := b.objectKey(key)
	if err != nil {
		return err
	}
	in := &s3.PutObjectInput{
		Bucket:        aws.String(b.bucket),
		Key:           aws.String(k),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	}
	cond := "If-Match"
	if rev == "" {
		in.IfNoneMatch, cond = aws.String("*"), "If-None-Match"
	} else {
		in.IfMatch = aws.String(rev)
	}
	_, err = b.api.PutObject(ctx, in)
	switch {
	case err == nil:
		return nil
	case isCode(err, "NotImplemented"):
		return fmt.Errorf("s3store: swap %s: the store does not support conditional writes (%s): the gate needs them: %w",
			b.where(k), cond, store.ErrNotExclusive)
	case rev != "" && isCode(err, "NoSuchKey"):
		// S3 and versitygw answer If-Match on a key that is gone with 404.
		return fmt.Errorf("s3store: swap %s: the key is gone since it was read: %w", b.where(k), store.ErrConflict)
	case !isCode(err, "PreconditionFailed", "ConditionalRequestConflict"):
		return mapErr("swap", b.where(k), err)
	}
	cur, _, lerr := b.Load(ctx, key)
	switch {
	case lerr == nil && bytes.Equal(cur, data):
		return nil // an earlier attempt of this PutObject was written
	case lerr == nil && rev == "":
		return fmt.Errorf("s3store: swap %s: the key exists already: %w", b.where(k), store.ErrConflict)
	case lerr == nil:
		return fmt.Errorf("s3store: swap %s: the key changed since it was read (ETag %s): %w", b.where(k), rev, store.ErrConflict)
	case errors.Is(lerr, store.ErrNotFound) && rev == "" && isCode(err, "PreconditionFailed"):
		return fmt.Errorf("s3store: swap %s: its current version is a delete marker, which the server counts as existing: %w",
			b.where(k), store.ErrNotExclusive)
	case errors.Is(lerr, store.ErrNotFound):
		// Deleted meanwhile, or a concurrent write in flight: either way
		// the key is no longer at rev.
		return fmt.Errorf("s3store: swap %s: the key changed since it was read: %w", b.where(k), store.ErrConflict)
	}
	return lerr
}

// List returns the store keys under prefix (relative to the store root),
// sorted, with ListObjectsV2 and its pagination. Zero-byte "directory
// markers" (keys ending in "/") are left out.
func (b *Bucket) List(ctx context.Context, prefix string) ([]string, error) {
	infos, err := b.ListInfo(ctx, prefix)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(infos))
	for i, in := range infos {
		keys[i] = in.Key
	}
	return keys, nil
}

var _ store.InfoLister = (*Bucket)(nil)

// ListInfo is List with each key's size and LastModified, which
// ListObjectsV2 returns with the keys.
func (b *Bucket) ListInfo(ctx context.Context, prefix string) ([]store.KeyInfo, error) {
	if p := strings.TrimRight(prefix, "/"); p != "" {
		if err := store.CheckKey(p); err != nil {
			return nil, fmt.Errorf("s3store %s: list: %w", b, err)
		}
	}
	root := ""
	if b.prefix != "" {
		root = b.prefix + "/"
	}
	where := b.where(root + prefix)
	pages := s3.NewListObjectsV2Paginator(b.api, &s3.ListObjectsV2Input{
		Bucket: aws.String(b.bucket),
		Prefix: aws.String(root + prefix),
	})
	var infos []store.KeyInfo
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, mapErr("list", where, err)
		}
		for _, o := range page.Contents {
			k, ok := strings.CutPrefix(aws.ToString(o.Key), root)
			if !ok || !strings.HasPrefix(k, prefix) || strings.HasSuffix(k, "/") {
				continue
			}
			infos = append(infos, store.KeyInfo{Key: k, Size: aws.ToInt64(o.Size), Modified: aws.ToTime(o.LastModified)})
		}
	}
	slices.SortFunc(infos, func(a, b store.KeyInfo) int { return strings.Compare(a.Key, b.Key) })
	return slices.CompactFunc(infos, func(a, b store.KeyInfo) bool { return a.Key == b.Key }), nil
}
