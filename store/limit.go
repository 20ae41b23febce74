package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The most bytes pinfs reads of one blob, record or file, by kind (see
// MaxBlob and docs/operations.md). What a store or a run record holds is
// a claim, and a claim may be as large as its writer likes: no read of one
// is unbounded.
const (
	// MaxRecord bounds a record: a run-record object or line (events,
	// bindings, permits), a gate's head and records, a policy, a
	// validation report, an approval, a list, a derivation record, a
	// digest-cache head, and any blob of a kind not listed here.
	MaxRecord = 16 << 20
	// MaxManifest bounds a manifest.
	MaxManifest = 64 << 20
	// MaxOutboard bounds a Bao outboard whose member's size the reader
	// does not know (its size is 0.1 % of a member's, 16 GiB for 16 TiB);
	// readers that know the member read exactly b3.OutboardSize.
	MaxOutboard = 16 << 30
	// MaxTable bounds a member table whose manifest the reader does not
	// hold (TableLimit bounds one it does), a shard's partial table, a
	// pin plan and a digest-cache segment.
	MaxTable = 16 << 30
	// MaxTableLine is the most bytes a member table may take per member
	// its manifest counts (a line holds a path, an id, a key, a version id
	// and digests: a few hundred bytes in practice).
	MaxTableLine = 64 << 10
)

// ErrTooLarge: a blob, record or file holds more bytes than pinfs reads of
// its kind.
var ErrTooLarge = errors.New("larger than pinfs reads")

// MaxBlob returns the most bytes the stores read of the blob at key, by
// the kind its key names (see the constants).
func MaxBlob(key string) int64 {
	kind, _, _ := strings.Cut(key, "/")
	switch kind {
	case "manifests":
		return MaxManifest
	case "bao":
		return MaxOutboard
	case "members", "shards", "plans":
		return MaxTable
	case "versions":
		if strings.HasPrefix(key, "versions/heads/") {
			return MaxRecord
		}
		return MaxTable
	}
	return MaxRecord
}

// TableLimit returns the most bytes of a member table whose manifest
// counts count members: MaxTableLine a member and 1 MiB, at most MaxTable.
func TableLimit(count int64) int64 {
	if count < 0 || count >= (MaxTable-1<<20)/MaxTableLine {
		return MaxTable
	}
	return 1<<20 + count*MaxTableLine
}

// TooLarge returns the error for what (a key or a path; "" when the
// caller's message names it) holding more than limit bytes: one line
// naming both, wrapping ErrTooLarge.
func TooLarge(what string, limit int64) error {
	err := fmt.Errorf("more than %s, the most pinfs reads of it: %w", bytesText(limit), ErrTooLarge)
	if what == "" {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// bytesText writes n bytes as a person reads it: 16 MiB, 64 KiB, 100 bytes.
func bytesText(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// ReadAtMost reads r to its end, at most limit bytes. size is the length
// the source claims (-1 when unknown): a claim beyond limit is refused
// before anything is read, and a source that yields more than limit bytes
// anyway is refused once limit+1 have come. Both errors are TooLarge of
// what.
func ReadAtMost(r io.Reader, size, limit int64, what string) ([]byte, error) {
	if size > limit {
		return nil, TooLarge(what, limit)
	}
	buf := make([]byte, 0, min(max(size, 0), limit)+1) // +1: the read that finds the end
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):min(int64(cap(buf)), limit+1)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, TooLarge(what, limit)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// LimitReader returns a reader of r that fails with TooLarge of what once
// r yields more than limit bytes: ReadAtMost for a stream that is not
// held whole.
func LimitReader(r io.Reader, limit int64, what string) io.Reader {
	return &limitReader{r: r, left: limit, limit: limit, what: what}
}

type limitReader struct {
	r           io.Reader
	left, limit int64
	what        string
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, TooLarge(l.what, l.limit)
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return 0, TooLarge(l.what, l.limit)
	}
	return n, err
}

// AtMostGetter is implemented by Blobs that read at most max bytes of a
// blob, refusing a larger one (with TooLarge) before holding it whole:
// every store pinfs has. Their Get is GetAtMost with MaxBlob(key).
type AtMostGetter interface {
	GetAtMost(ctx context.Context, key string, max int64) ([]byte, error)
}

// GetAtMost returns the blob at key from g, if it holds at most max
// bytes: through g's GetAtMost when g is an AtMostGetter, else through
// Get, refusing a larger blob once it is read.
func GetAtMost(ctx context.Context, g interface {
	Get(ctx context.Context, key string) ([]byte, error)
}, key string, max int64) ([]byte, error) {
	if a, ok := g.(AtMostGetter); ok {
		return a.GetAtMost(ctx, key, max)
	}
	b, err := g.Get(ctx, key)
	if err == nil && int64(len(b)) > max {
		return nil, TooLarge(key, max)
	}
	return b, err
}
