// Package verify defines the pinfs manifest format v1 and everything that
// decides whether a manifest can be trusted: the canonical encoding, the
// digest rule, the member table, path and structure checks, and loading a
// snapshot from a store so that only verified snapshots reach the mount.
// docs/manifest.md is the prose specification of the same rules.
package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// ErrNotDigest is returned for a snapshot name that is not a full digest.
var ErrNotDigest = errors.New("pinfs accepts manifest digests only (sha256:<64 hex>), never an alias, `latest`, a prefix or a path")

// Digest is a SHA-256 content address in the form "sha256:<64 lower-case hex>".
type Digest string

// ParseDigest accepts exactly "sha256:<64 lower-case hex>".
func ParseDigest(s string) (Digest, error) {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 64 {
		return "", fmt.Errorf("%q: %w", s, ErrNotDigest)
	}
	for _, c := range []byte(h) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", fmt.Errorf("%q: %w", s, ErrNotDigest)
		}
	}
	return Digest(s), nil
}

// SHA256 returns the Digest of b.
func SHA256(b []byte) Digest {
	s := sha256.Sum256(b)
	return Digest("sha256:" + hex.EncodeToString(s[:]))
}

// Hex returns the 64 hex digits of d.
func (d Digest) Hex() string { return strings.TrimPrefix(string(d), "sha256:") }

// String returns d as text.
func (d Digest) String() string { return string(d) }

// ManifestKey is the store key of the manifest with digest d.
func ManifestKey(d Digest) string { return "manifests/sha256/" + d.Hex() }

// MembersKey is the store key of the member table with digest d.
func MembersKey(d Digest) string { return "members/sha256/" + d.Hex() }

// MembersURI is the manifest's members.uri for a member table with digest d.
func MembersURI(d Digest) string { return "cas://sha256/" + d.Hex() }

// OutboardKey is the store key of the Bao outboard of the member whose
// BLAKE3 digest has the given hex.
func OutboardKey(blake3Hex string) string { return "bao/blake3/" + blake3Hex }

// CASKey is the store key of member bytes pinned from a local directory.
func CASKey(blake3Hex string) string { return "cas/blake3/" + blake3Hex }
