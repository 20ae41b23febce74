// Package cache holds the two block cache tiers of the pinfs read path: a
// memory tier (Mem, ristretto, bounded by bytes, behind a small front that
// admits every block at once, so that ristretto's admission policy never
// loses a block read ahead) and a disk tier (Disk, bounded by bytes, least
// recently used evicted first).
//
// Both tiers are keyed by Key, a member's BLAKE3 content digest and a block
// index, never by a path, a manifest or a version: two manifests that share
// a member share its cached blocks, and a remount finds them warm.
//
// Neither tier verifies anything. The memory tier must only be given
// verified blocks, so that a memory hit can be served as it is; the disk
// tier may hold anything a disk can hold, so its caller (store/blocks)
// verifies every disk hit and removes a block that fails.
package cache

import (
	"encoding/binary"
	"fmt"

	"github.com/pinfs/pinfs/verify/b3"
)

// BlockSize is the size of a cached block in bytes (1 MiB). Block i of a
// member holds the member's bytes [i*BlockSize, min((i+1)*BlockSize, size)).
// It is a multiple of b3.GroupSize, so every block can be verified on its own.
const BlockSize = 1 << 20

// Key names one block of one member by immutable identity: the member's
// content digest and the block's index.
type Key struct {
	Digest b3.Sum
	Index  int64
}

// String returns "<64 hex>-<index>".
func (k Key) String() string { return fmt.Sprintf("%s-%d", k.Digest.Hex(), k.Index) }

// bytes returns the key as a 40-byte string: digest, then big-endian index.
func (k Key) bytes() string {
	var b [40]byte
	copy(b[:32], k.Digest[:])
	binary.BigEndian.PutUint64(b[32:], uint64(k.Index))
	return string(b[:])
}
