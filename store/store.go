// Package store defines how pinfs reaches bytes: metadata blobs addressed by
// content (manifests, member tables, Bao outboards) and member objects that
// are always named by an immutable identity (an S3 object at an exact
// VersionId, or a blob in the store's content-addressed area).
//
// The backends live in sub-packages: store/s3store (aws-sdk-go-v2) and
// store/localstore (a directory). store/dial turns a --store URL into a
// Store. Nothing in this package knows about FUSE or manifests.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"
)

// Sentinel errors. Backends wrap them so that callers can use errors.Is.
var (
	// ErrNotFound: the key, object or pinned version does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAccessDenied: the credentials may not read or write the object.
	ErrAccessDenied = errors.New("access denied")
	// ErrVersionMismatch: the backend answered with another version than the one asked for.
	ErrVersionMismatch = errors.New("response version id differs from the pinned version")
	// ErrUnversioned: a bucket without versioning, or an object whose version is "null".
	ErrUnversioned = errors.New("not versioned")
	// ErrNoVersion: an S3 member object was named without a version id.
	ErrNoVersion = errors.New("object has no pinned version id")
	// ErrUnreachable: the request got no answer: the connection was
	// refused or reset before a response, or the name lookup failed.
	ErrUnreachable = errors.New("the store does not answer")
	// ErrThrottled: the backend asked the client to slow down (S3 503
	// SlowDown, 429 and the like); callers back off before they ask again.
	ErrThrottled = errors.New("throttled: the store asks to slow down")
	// ErrStalled: a response delivered no bytes for too long and was cut
	// off (store/blocks's stall timeout); it is also the cause
	// (context.Cause) of the request's context then, so that a store can
	// tell a stalled request from one its caller gave up on.
	ErrStalled = errors.New("no bytes received within the stall timeout")
	// ErrBadResponse: the backend answered with other bytes than asked for
	// (a ranged read answered without the asked Content-Range, as by a
	// server or proxy that ignores Range). Asking again would get the same.
	ErrBadResponse = errors.New("the store answered with another range than asked for")
	// ErrExist: Create found the key taken already.
	ErrExist = errors.New("already exists")
	// ErrNotExclusive: the backend cannot create this key exclusively (no
	// conditional writes, or a current delete marker it counts as existing).
	ErrNotExclusive = errors.New("the store cannot create objects exclusively")
	// ErrConflict: a conditional write lost: the key changed since it was
	// read (or exists, for a create).
	ErrConflict = errors.New("the key changed since it was read")
)

var casRE = regexp.MustCompile(`^blake3:[0-9a-f]{64}$`)

// Object names one immutable member object. Exactly one form is set:
// an S3 object at an exact version (Bucket, Key, VersionID), or a blob in
// the store's content-addressed area (CAS, "blake3:<64 hex>").
// Use NewVersion or NewCAS, which validate; backends call Validate again
// before every request, so a zero or half-filled Object is never read.
type Object struct {
	Bucket    string
	Key       string
	VersionID string
	CAS       string
}

// NewVersion returns the Object for bucket/key at version id. It refuses an
// empty version and S3's "null" version (an object written while the bucket
// was unversioned), since neither names immutable bytes.
func NewVersion(bucket, key, versionID string) (Object, error) {
	o := Object{Bucket: bucket, Key: key, VersionID: versionID}
	return o, o.Validate()
}

// NewCAS returns the Object for a content-addressed blob ("blake3:<hex>").
func NewCAS(digest string) (Object, error) {
	o := Object{CAS: digest}
	return o, o.Validate()
}

// Validate reports whether o names exactly one immutable object.
func (o Object) Validate() error {
	switch {
	case o.CAS != "" && (o.Bucket != "" || o.Key != "" || o.VersionID != ""):
		return fmt.Errorf("object %v: both a content address and an S3 location", o)
	case o.CAS != "":
		if !casRE.MatchString(o.CAS) {
			return fmt.Errorf("object %q: not a blake3:<64 hex> content address", o.CAS)
		}
		return nil
	case o.Bucket == "" || o.Key == "":
		return fmt.Errorf("object %v: empty bucket or key", o)
	case o.VersionID == "":
		return fmt.Errorf("s3://%s/%s: %w", o.Bucket, o.Key, ErrNoVersion)
	case o.VersionID == "null":
		return fmt.Errorf("s3://%s/%s: version id %q: %w", o.Bucket, o.Key, o.VersionID, ErrUnversioned)
	}
	return nil
}

// String returns s3://bucket/key?versionId=v or cas:blake3:<hex>.
func (o Object) String() string {
	if o.CAS != "" {
		return "cas:" + o.CAS
	}
	return fmt.Sprintf("s3://%s/%s?versionId=%s", o.Bucket, o.Key, o.VersionID)
}

// Info describes a member object as the backend reports it.
type Info struct {
	Size int64
	ETag string // S3 only; quoted as S3 returns it
}

// ObjectReader reads member objects. Implementations must validate obj,
// send the exact version with every S3 request and check the version id
// of every response (ErrVersionMismatch).
type ObjectReader interface {
	// ReadRange returns length bytes of obj starting at off; length < 0
	// means to the end. The caller closes the reader. A short body is
	// reported by the reader as io.ErrUnexpectedEOF.
	ReadRange(ctx context.Context, obj Object, off, length int64) (io.ReadCloser, error)
	// Stat returns obj's size (HEAD with the version id for S3).
	Stat(ctx context.Context, obj Object) (Info, error)
}

// Blobs holds metadata blobs under keys relative to the store root, such as
// "manifests/sha256/<hex>". Blobs are content addressed by their callers, so
// Put of an existing key with the same bytes is a no-op and never an error.
type Blobs interface {
	Get(ctx context.Context, key string) ([]byte, error)
	Put(ctx context.Context, key string, data []byte) error
}

// Creator is implemented by Blobs that can create a blob exclusively: of
// two concurrent Creates of one key, exactly one succeeds. Unlike Put, it
// is for keys that are not content addressed (a run's binding), so an
// existing key is an error whatever it holds.
type Creator interface {
	// Create stores data at key only if key does not exist. It fails with
	// an error wrapping ErrExist if it does, and with one wrapping
	// ErrNotExclusive if the backend cannot guarantee that; it never
	// falls back to an unconditional write.
	Create(ctx context.Context, key string, data []byte) error
}

// Swapper is implemented by Blobs that can replace a key conditionally
// (compare-and-swap). It is for the few keys that are not content
// addressed and must change in place, one writer at a time: a gate's head.
type Swapper interface {
	// Load returns key's bytes and an opaque revision (S3: the ETag; a
	// local store: the hex SHA-256 of the bytes). It fails with an error
	// wrapping ErrNotFound if key does not exist.
	Load(ctx context.Context, key string) (data []byte, rev string, err error)
	// Swap writes data at key only if key's revision is still rev; rev ""
	// means key must not exist. A lost race fails with an error wrapping
	// ErrConflict; a backend that cannot make the write conditional fails
	// with one wrapping ErrNotExclusive and writes nothing. Swap never
	// falls back to an unconditional write.
	Swap(ctx context.Context, key string, data []byte, rev string) error
}

// KeyLister lists the blob keys under a prefix (relative to the store
// root, such as "gates/"), sorted.
type KeyLister interface {
	List(ctx context.Context, prefix string) ([]string, error)
}

// KeyInfo is one key of a listing with what the backend says about it.
// Size and Modified are the backend's word, not covered by any digest.
type KeyInfo struct {
	Key      string
	Size     int64
	Modified time.Time // when the backend last wrote the key: S3 LastModified, a file's mtime
}

// InfoLister is implemented by a KeyLister that can also report each key's
// size and modification time, from the same listing requests.
type InfoLister interface {
	// ListInfo is List with each key's KeyInfo, sorted by key.
	ListInfo(ctx context.Context, prefix string) ([]KeyInfo, error)
}

// Store is what the pinfs commands work against: metadata blobs, member
// reads, and a content-addressed area for member bytes pinned from a
// local directory.
type Store interface {
	Blobs
	ObjectReader
	// PutCAS stores size bytes from r under digest ("blake3:<hex>") in the
	// content-addressed area (key "cas/blake3/<hex>") and returns the Object
	// to pin: for an S3 store that is the uploaded key at its new VersionID,
	// for a local store the CAS form.
	//
	// The store hashes the bytes it writes and commits them only if r yields
	// exactly size bytes with that BLAKE3 digest; otherwise it fails (an
	// error wrapping b3.ErrMismatch for bytes of another digest) and leaves
	// nothing new behind. It never trusts a blob already in place by its
	// size: it reuses one (without reading r) only after hashing it, and
	// replaces one that does not hold the bytes of digest.
	PutCAS(ctx context.Context, digest string, r io.Reader, size int64) (Object, error)
	// String returns the store URL.
	String() string
}

// ObjectVersion is one entry of a source listing: the current version of a key.
type ObjectVersion struct {
	Key       string
	VersionID string
	Size      int64
	ETag      string
}

// Lister lists the current version of every object under an S3 prefix.
// It fails with ErrUnversioned (naming the keys) when the bucket has no
// versioning or a current version is "null".
type Lister interface {
	ListCurrent(ctx context.Context, bucket, prefix string) ([]ObjectVersion, error)
}

// Content names a member's bytes by what they are, for a store that reads
// members by content through a shared cache tier (store/httpstore): the
// tier addresses a block by the member's digest, and the origin behind it
// finds the pinned object by the snapshot and ordinal given as a hint,
// then checks that they name that digest. Object is the pinned identity
// the member table gives; a store that cannot read by content reads it.
type Content struct {
	Object   Object
	Digest   string // "blake3:<64 hex>"
	Size     int64
	Snapshot string // "sha256:<64 hex>": the manifest whose member table names the member
	Index    int    // the member's ordinal in that table
}

// ContentReader is implemented by a store that reads member bytes by
// content through a shared cache (a tier of HTTP caches in front of a
// pinfs origin) rather than by object.
type ContentReader interface {
	// ReadContent is ReadRange for the member c: length bytes from off
	// (< 0: to the end). fresh asks for bytes that bypass every shared
	// cache, and that the caches replace their copy with: the reader asks
	// so after the cached copy failed verification.
	ReadContent(ctx context.Context, c Content, off, length int64, fresh bool) (io.ReadCloser, error)
}
