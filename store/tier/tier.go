// Package tier is the protocol between a pinfs origin (pinfs serve) and
// the readers behind a tier of HTTP caches (store/httpstore): which URLs
// name which immutable bytes, and the headers both sides agree on. It
// does no I/O; Check verifies a metadata blob against its name.
//
// Every URL is relative to a root (the origin's root, or the tier's
// prefix in front of it) and names bytes that never change:
//
//	manifests/sha256/<64 hex>    a manifest, by the SHA-256 of its bytes
//	members/sha256/<64 hex>      a member table, by the SHA-256 of its bytes
//	bao/blake3/<64 hex>          the Bao outboard of the member of that BLAKE3 digest
//	blocks/blake3/<64 hex>/<i>   block i (1 MiB, the last one shorter) of that member
//
// The metadata paths are the store's own blob keys. A block URL carries a
// hint in its query, snapshot=sha256:<hex>&member=<ordinal>, that tells
// the origin where to find the member's pinned object; the hint does not
// change the bytes, so a tier leaves it out of its cache key, and two
// snapshots that share a member share its cached blocks.
package tier

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// BlockSize is the size of a block URL's bytes (the last block of a member
// is shorter): the block reader's block (store/blocks.BlockSize; a test
// holds them equal). Another size would be another path.
const BlockSize = 1 << 20

// BypassHeader is the request header that asks every cache on the way to
// fetch the bytes from the origin again and to replace its copy: a reader
// sends it (value "1") once a cached copy failed verification. The shipped
// nginx configuration honours it (proxy_cache_bypass).
const BypassHeader = "X-Pinfs-Bypass"

// The query parameters of a block URL's hint.
const (
	SnapshotParam = "snapshot"
	MemberParam   = "member"
)

// CacheControl is the Cache-Control of every answer with bytes: they never
// change, so any cache may keep them for a year.
const CacheControl = "public, max-age=31536000, immutable"

// The paths of the origin that are not content.
const (
	ReadyPath   = "-/ready"
	MetricsPath = "-/metrics"
)

var (
	metaRE  = regexp.MustCompile(`^(manifests/sha256|members/sha256|bao/blake3)/([0-9a-f]{64})$`)
	blockRE = regexp.MustCompile(`^blocks/blake3/([0-9a-f]{64})/(0|[1-9][0-9]{0,12})$`)
)

// Meta reports whether path (relative to the root) names a metadata blob
// the origin serves, and returns its kind ("manifests/sha256",
// "members/sha256" or "bao/blake3") and the hex digest in its name.
func Meta(path string) (kind, hex string, ok bool) {
	m := metaRE.FindStringSubmatch(path)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// Block is a block URL: block Index of the member of BLAKE3 digest Hex,
// and the hint that says where the origin finds it.
type Block struct {
	Hex      string // the member's BLAKE3 digest, 64 hex
	Index    int64
	Snapshot string // "sha256:<64 hex>"
	Member   int    // the member's ordinal in Snapshot's table
}

// Path returns b's path relative to the root, without the hint.
func (b Block) Path() string { return "blocks/blake3/" + b.Hex + "/" + strconv.FormatInt(b.Index, 10) }

// Query returns b's hint as a URL query.
func (b Block) Query() string {
	return SnapshotParam + "=" + url.QueryEscape(b.Snapshot) + "&" + MemberParam + "=" + strconv.Itoa(b.Member)
}

// ETag returns the entity tag of b's bytes.
func (b Block) ETag() string { return `"blake3:` + b.Hex + "/" + strconv.FormatInt(b.Index, 10) + `"` }

// MetaETag returns the entity tag of the metadata blob of kind and hex.
func MetaETag(kind, hex string) string {
	return `"` + kind[strings.IndexByte(kind, '/')+1:] + ":" + hex + `"`
}

var snapRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ParseBlock parses a block URL's path (relative to the root) and query.
func ParseBlock(path string, q url.Values) (Block, error) {
	m := blockRE.FindStringSubmatch(path)
	if m == nil {
		return Block{}, fmt.Errorf("%q: not a block path (blocks/blake3/<64 hex>/<index>)", path)
	}
	i, err := strconv.ParseInt(m[2], 10, 64)
	if err != nil {
		return Block{}, fmt.Errorf("%q: block index: %w", path, err)
	}
	b := Block{Hex: m[1], Index: i, Snapshot: q.Get(SnapshotParam)}
	if !snapRE.MatchString(b.Snapshot) {
		return Block{}, fmt.Errorf("block %s: %s=%q: not a sha256:<64 hex> snapshot digest", b.Path(), SnapshotParam, b.Snapshot)
	}
	n, err := strconv.Atoi(q.Get(MemberParam))
	if err != nil || n < 0 || strconv.Itoa(n) != q.Get(MemberParam) {
		return Block{}, fmt.Errorf("block %s: %s=%q: not a member ordinal", b.Path(), MemberParam, q.Get(MemberParam))
	}
	b.Member = n
	return b, nil
}
