// Package versions is the digest cache of S3 pins: a compact index from an
// object version, (bucket, key, versionId), to the size and BLAKE3 digest
// of its bytes. An S3 version is immutable, so once pinfs has hashed one
// it never needs to read it again to pin it; a re-pin looks each listed
// version up here and reads only the versions it does not find.
//
// # Keys
//
// Relative to the store root:
//
//   - versions/sha256/<hex>: a segment, a set of entries of one bucket,
//     named by the SHA-256 of its bytes (content addressed, written with
//     Put, never changed).
//
//   - versions/heads/sha256/<hex>: the head of one source, named by the
//     SHA-256 of its URI "s3://BUCKET/PREFIX" (PREFIX ends in "/" unless
//     empty; see Source). The head is canonical JSON (verify/jcs):
//
//     {"schema":"pinfs.versions.head.v1","segments":["sha256:<hex>",…],"source":"s3://b/p/"}
//
//     It is the only key the package overwrites, and only with a
//     conditional write (store.Swapper): Record appends a segment to it,
//     and after MaxSegments segments compacts them into one.
//
// # Segment encoding
//
// A segment is binary and canonical: one set of entries has exactly one
// encoding, so Parse followed by Encode gives back the same bytes.
//
//	"pinfs.versions.v1\n"
//	uvarint len(bucket), bucket
//	uvarint count
//	count × { uvarint shared      bytes the key shares with the previous key (0 for the first),
//	          uvarint len(suffix), suffix   the rest of the key,
//	          uvarint len(versionID), versionID,
//	          uvarint size,
//	          32 bytes              the BLAKE3 digest of the version's bytes }
//
// Entries are sorted by key, then by version id, without duplicates; shared
// is the whole common prefix with the previous key. Every uvarint is in its
// shortest form. Bounds: bucket 1..255 bytes, key 1..1024 bytes, version
// id 1..1024 bytes and not "null", size at most 1<<50, count at most
// 1<<26. Nothing may follow the last entry.
//
// # Trust
//
// The cache is a shortcut, not evidence. Load skips (and counts) a segment
// whose bytes do not hash to its name, do not parse or belong to another
// bucket, and treats a bad head as empty; callers also check the stored
// outboard against the cached digest (b3.CheckOutboard). None of that ties
// a digest to a version's bytes: anyone who can write the store can make a
// pin record a digest its member's bytes do not have. `pinfs validate`
// re-hashes every member no trusted parent vouches for, so such a digest
// never becomes VALIDATED (docs/pin-at-scale.md).
package versions

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/pinfs/pinfs/verify/b3"
)

// Entry is one pinned object version and what its bytes hash to.
type Entry struct {
	Key, VersionID string
	Size           int64
	Digest         b3.Sum
}

// ErrInvalid is wrapped by the errors of Parse.
var ErrInvalid = errors.New("not a pinfs version segment")

const (
	magic      = "pinfs.versions.v1\n"
	maxBucket  = 255
	maxKey     = 1024
	maxVersion = 1024
	maxSize    = 1 << 50
	maxCount   = 1 << 26
	// minEntry is the fewest bytes an entry takes: four one-byte uvarints,
	// a one-byte version id and the digest (the key suffix may be empty).
	minEntry = 4 + 1 + 32
)

// compare orders entries by key, then by version id.
func compare(a, b *Entry) int {
	if c := strings.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	return strings.Compare(a.VersionID, b.VersionID)
}

// check reports whether e is within the bounds of the encoding.
func (e *Entry) check() error {
	switch {
	case len(e.Key) < 1 || len(e.Key) > maxKey:
		return fmt.Errorf("key of %d bytes: not 1..%d", len(e.Key), maxKey)
	case len(e.VersionID) < 1 || len(e.VersionID) > maxVersion:
		return fmt.Errorf("key %q: version id of %d bytes: not 1..%d", e.Key, len(e.VersionID), maxVersion)
	case e.VersionID == "null":
		return fmt.Errorf("key %q: version id %q names no immutable version", e.Key, e.VersionID)
	case e.Size < 0 || e.Size > maxSize:
		return fmt.Errorf("key %q: size %d out of range", e.Key, e.Size)
	}
	return nil
}

// Encode returns the canonical segment of bucket's entries: sorted by key,
// then version id, identical duplicates dropped. Two entries of one
// version with different sizes or digests are an error, and so is an entry
// out of the bounds of the encoding.
func Encode(bucket string, es []Entry) ([]byte, error) {
	if len(bucket) < 1 || len(bucket) > maxBucket {
		return nil, fmt.Errorf("versions: bucket of %d bytes: not 1..%d", len(bucket), maxBucket)
	}
	sorted := slices.Clone(es)
	slices.SortFunc(sorted, func(a, b Entry) int { return compare(&a, &b) })
	sorted = slices.CompactFunc(sorted, func(a, b Entry) bool { return compare(&a, &b) == 0 && a == b })
	if len(sorted) > maxCount {
		return nil, fmt.Errorf("versions: %d entries: more than %d", len(sorted), maxCount)
	}
	n := len(magic) + uvarintLen(len(bucket)) + len(bucket) + uvarintLen(len(sorted))
	for i := range sorted {
		e := &sorted[i]
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("versions: %w", err)
		}
		if i > 0 && compare(&sorted[i-1], e) == 0 {
			return nil, fmt.Errorf("versions: key %q version %q: two different entries", e.Key, e.VersionID)
		}
		shared := 0
		if i > 0 {
			shared = commonPrefix(sorted[i-1].Key, e.Key)
		}
		suffix := len(e.Key) - shared
		n += uvarintLen(shared) + uvarintLen(suffix) + suffix + uvarintLen(len(e.VersionID)) +
			len(e.VersionID) + uvarintLen(int(e.Size)) + len(e.Digest)
	}
	b := make([]byte, 0, n)
	b = append(b, magic...)
	b = appendString(b, bucket)
	b = binary.AppendUvarint(b, uint64(len(sorted)))
	prev := ""
	for i := range sorted {
		e := &sorted[i]
		shared := commonPrefix(prev, e.Key)
		b = binary.AppendUvarint(b, uint64(shared))
		b = appendString(b, e.Key[shared:])
		b = appendString(b, e.VersionID)
		b = binary.AppendUvarint(b, uint64(e.Size))
		b = append(b, e.Digest[:]...)
		prev = e.Key
	}
	return b, nil
}

// uvarintLen is the length of the uvarint of x >= 0.
func uvarintLen(x int) int { return (bits.Len64(uint64(x)|1) + 6) / 7 }

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// Parse decodes a segment and checks that it is exactly in the form Encode
// writes (magic, bounds, sorted and unique entries, shortest uvarints,
// nothing after the last entry). Its errors wrap ErrInvalid.
func Parse(b []byte) (bucket string, es []Entry, err error) {
	bucket, err = parse(b, func(n int) { es = make([]Entry, 0, n) }, func(key, version []byte, size int64, d *b3.Sum) {
		es = append(es, Entry{Key: string(key), VersionID: string(version), Size: size, Digest: *d})
	})
	if err != nil {
		return "", nil, err
	}
	return bucket, es, nil
}

// parse checks segment b and calls each for its entries in order, with key
// and version valid only during the call. grow is called first with a
// bound on the number of entries that does not trust the count.
func parse(b []byte, grow func(n int), each func(key, version []byte, size int64, d *b3.Sum)) (string, error) {
	r := reader{b: b}
	if !bytes.HasPrefix(b, []byte(magic)) {
		return "", fmt.Errorf("versions: segment: %w: no magic", ErrInvalid)
	}
	r.off = len(magic)
	bucket := r.bytes("bucket", 1, maxBucket)
	count := r.uvarint("count", maxCount)
	if r.err != nil {
		return "", r.err
	}
	grow(int(min(count, uint64(len(b)-r.off)/minEntry)))
	key := make([]byte, 0, maxKey)
	prevVersion := make([]byte, 0, maxVersion)
	var d b3.Sum
	for i := range count {
		shared := r.uvarint("shared", uint64(len(key)))
		suffix := r.bytes("key", 0, maxKey-int(shared))
		version := r.bytes("version id", 1, maxVersion)
		size := r.uvarint("size", maxSize)
		r.digest(&d)
		if r.err != nil {
			return "", fmt.Errorf("%w (entry %d)", r.err, i)
		}
		// shared must be the whole common prefix, and the key must not
		// sort before the previous one (compared past the shared bytes).
		if shared < uint64(len(key)) && len(suffix) > 0 && suffix[0] == key[shared] {
			return "", r.fail("entry %d: key shares more than %d bytes with the previous one", i, shared)
		}
		c := -1
		if i > 0 {
			c = bytes.Compare(key[shared:], suffix)
		}
		key = append(key[:shared], suffix...)
		switch {
		case len(key) == 0:
			return "", r.fail("entry %d: empty key", i)
		case string(version) == "null":
			return "", r.fail("entry %d: version id %q names no immutable version", i, version)
		case c > 0 || c == 0 && bytes.Compare(prevVersion, version) >= 0:
			return "", r.fail("entry %d: key %q version %q: not after the previous entry", i, key, version)
		}
		prevVersion = append(prevVersion[:0], version...)
		each(key, version, int64(size), &d)
	}
	if r.off != len(b) {
		return "", r.fail("%d bytes after the last entry", len(b)-r.off)
	}
	return string(bucket), nil
}

// reader decodes the fields of a segment; the first error sticks.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(format string, a ...any) error {
	return fmt.Errorf("versions: segment: %w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// uvarint reads a uvarint in its shortest form of at most max.
func (r *reader) uvarint(what string, max uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	switch {
	case n <= 0:
		r.err = r.fail("%s at byte %d: truncated or overlong uvarint", what, r.off)
	case n > 1 && r.b[r.off+n-1] == 0:
		r.err = r.fail("%s at byte %d: uvarint not in its shortest form", what, r.off)
	case v > max:
		r.err = r.fail("%s at byte %d: %d is more than %d", what, r.off, v, max)
	}
	if r.err != nil {
		return 0
	}
	r.off += n
	return v
}

// bytes reads a length-prefixed field of lo..hi bytes, aliasing r.b.
func (r *reader) bytes(what string, lo, hi int) []byte {
	at := r.off
	n := r.uvarint(what+" length", uint64(hi))
	if r.err != nil {
		return nil
	}
	switch {
	case n < uint64(lo):
		r.err = r.fail("%s at byte %d: %d bytes, fewer than %d", what, at, n, lo)
	case n > uint64(len(r.b)-r.off):
		r.err = r.fail("%s at byte %d: truncated", what, at)
	}
	if r.err != nil {
		return nil
	}
	p := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return p
}

func (r *reader) digest(d *b3.Sum) {
	if r.err != nil {
		return
	}
	if len(r.b)-r.off < len(d) {
		r.err = r.fail("digest at byte %d: truncated", r.off)
		return
	}
	r.off += copy(d[:], r.b[r.off:])
}
