package versions

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// MaxSegments is how many segments a head holds before Record compacts.
const MaxSegments = 8

const (
	// retries bounds the tries Record makes again after a lost Swap.
	retries = 10
	// maxPause bounds the random pause before Record tries again.
	maxPause = 20 * time.Millisecond
)

// SegmentKey returns the store key of the segment with digest d.
func SegmentKey(d verify.Digest) string { return "versions/sha256/" + d.Hex() }

// HeadKey returns the store key of the head of source (see Source).
func HeadKey(source string) string {
	return "versions/heads/sha256/" + verify.SHA256([]byte(source)).Hex()
}

// Source returns the URI "s3://bucket/prefix" of a pinned prefix, with
// prefix normalised to end in "/" unless it is empty.
func Source(bucket, prefix string) string {
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return "s3://" + bucket + "/" + prefix
}

// Store is what the index needs: content-addressed segments and a head
// replaced only conditionally.
type Store interface {
	store.Blobs
	store.Swapper
}

// Index is the digest cache of one source (bucket and prefix) in a store.
// It holds no state of its own, so it is safe for concurrent use, and so
// are indexes of the same source in other processes: they agree through
// the store's conditional writes.
type Index struct {
	st     Store
	bucket string
	source string
}

// Open returns the index of bucket and prefix in st. It reads nothing.
func Open(st Store, bucket, prefix string) *Index {
	return &Index{st: st, bucket: bucket, source: Source(bucket, prefix)}
}

// Load reads the head and its segments. No head: an empty Table, nil
// error. A segment that is missing, fails its digest or Parse, or names
// another bucket is skipped and counted in Table.Skipped, and so is a head
// that is not one Record writes (it reads as empty). Only store errors
// other than not-found, and ctx's, are returned.
func (x *Index) Load(ctx context.Context) (*Table, error) {
	t := NewTable()
	h, err := x.head(ctx, t)
	if err != nil {
		return nil, err
	}
	for _, d := range h.segs {
		b, err := x.st.Get(ctx, SegmentKey(d))
		switch {
		case errors.Is(err, store.ErrNotFound):
			t.Skipped++
			continue
		case err != nil:
			return nil, fmt.Errorf("versions: segment %s of %s: %w", d, x.source, err)
		}
		t.Bytes += int64(len(b))
		if verify.SHA256(b) != d || !x.addSegment(t, b) {
			t.Skipped++
		}
	}
	return t, nil
}

// addSegment adds the entries of segment b to t if it parses and belongs
// to x's bucket; it reports whether it did. It parses b twice, first
// without keeping anything, so that a bad segment adds no entry at all.
func (x *Index) addSegment(t *Table, b []byte) bool {
	bucket, err := parse(b, func(int) {}, func([]byte, []byte, int64, *b3.Sum) {})
	if err != nil || bucket != x.bucket {
		return false
	}
	_, err = parse(b, func(int) {}, t.addBytes)
	return err == nil
}

// Record writes a segment of fresh (none when fresh is empty) and appends
// it to the head with Swap from the revision it loaded. When the Swap
// loses to another writer (store.ErrConflict) it loads the head again and
// appends again, up to 10 times after a short random pause.
//
// When live != nil and the head would then hold more than MaxSegments
// segments, Record compacts instead: one segment of live and fresh
// replaces every segment the head held when Record decided to compact, so
// entries of versions no longer live leave the cache. Segments other
// writers appended since are kept. A store without conditional writes
// (store.ErrNotExclusive) fails; callers treat any Record error as a
// warning, since the cache is only a shortcut.
func (x *Index) Record(ctx context.Context, fresh, live []Entry) error {
	r := recording{x: x}
	if len(fresh) > 0 {
		b, err := Encode(x.bucket, fresh)
		if err != nil {
			return err
		}
		r.fresh, r.freshSeg = b, verify.SHA256(b)
	}
	for attempt := 0; ; attempt++ {
		h, err := x.head(ctx, &Table{})
		if err != nil {
			return err
		}
		next, err := r.next(ctx, h.segs, fresh, live)
		if err != nil || next == nil {
			return err
		}
		b, err := encodeHead(x.source, next)
		if err != nil {
			return err
		}
		err = x.st.Swap(ctx, HeadKey(x.source), b, h.rev)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt == retries {
			return fmt.Errorf("versions: head of %s: %w", x.source, err)
		}
		t := time.NewTimer(time.Millisecond + rand.N(maxPause))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// recording is the state of one Record across its tries.
type recording struct {
	x        *Index
	fresh    []byte        // the segment of the fresh entries, if any
	freshSeg verify.Digest // its digest
	putFresh bool          // fresh is in the store
	base     map[verify.Digest]bool
	compact  verify.Digest // the segment that replaces base ("" for no entries)
}

// next returns the segments the head should name instead of segs, writing
// the segments it names first; nil when the head needs no change.
func (r *recording) next(ctx context.Context, segs []verify.Digest, fresh, live []Entry) ([]verify.Digest, error) {
	has := slices.Contains(segs, r.freshSeg)
	if r.base == nil && live != nil && len(segs)+b2i(r.fresh != nil && !has) > MaxSegments {
		if err := r.compactInto(ctx, segs, fresh, live); err != nil {
			return nil, err
		}
	}
	if r.base != nil {
		next := make([]verify.Digest, 0, 1+len(segs))
		if r.compact != "" {
			next = append(next, r.compact)
		}
		for _, d := range segs {
			if !r.base[d] && d != r.compact {
				next = append(next, d)
			}
		}
		return next, nil
	}
	if r.fresh == nil || has {
		return nil, nil
	}
	if !r.putFresh {
		if err := r.x.st.Put(ctx, SegmentKey(r.freshSeg), r.fresh); err != nil {
			return nil, fmt.Errorf("versions: segment of %s: %w", r.x.source, err)
		}
		r.putFresh = true
	}
	return append(slices.Clip(segs), r.freshSeg), nil
}

// compactInto writes the segment of live and fresh that replaces segs.
func (r *recording) compactInto(ctx context.Context, segs []verify.Digest, fresh, live []Entry) error {
	r.base = make(map[verify.Digest]bool, len(segs))
	for _, d := range segs {
		r.base[d] = true
	}
	all := append(slices.Clip(live), fresh...)
	if len(all) == 0 {
		return nil
	}
	b, err := Encode(r.x.bucket, all)
	if err != nil {
		return err
	}
	r.compact = verify.SHA256(b)
	if err := r.x.st.Put(ctx, SegmentKey(r.compact), b); err != nil {
		return fmt.Errorf("versions: segment of %s: %w", r.x.source, err)
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
