package b3

import (
	"encoding/binary"
	"fmt"

	"lukechampine.com/blake3/guts"
)

// CheckOutboard reports whether outboard is the Bao outboard of size bytes
// with digest d: the right length and header, and every parent node hashes
// up the tree to d, so no member bytes are needed.
//
// It checks the 8-byte little-endian size header and the length the tree
// of size bytes needs, then compresses each parent node (its left and
// right chaining values, with the ROOT flag at the top) and compares it
// with the chaining value the level above names, up to d. The groups of
// GroupSize bytes at the leaves are not in the outboard, so they are not
// checked: a member of at most GroupSize bytes has an outboard of the
// header alone, and only the header is checked (for 0 bytes, d must be
// the digest of no bytes). The outboard is thereby consistent with d, which
// is what Verify needs of it; whether member bytes match is still
// Verify's job, group by group.
//
// A wrong length or header fails with a plain error, a tree that does not
// hash to d with one wrapping ErrMismatch.
func CheckOutboard(d Sum, size int64, outboard []byte) error {
	if size < 0 {
		return fmt.Errorf("outboard: negative size %d", size)
	}
	if want := outboardLen(size); int64(len(outboard)) != want {
		return fmt.Errorf("outboard of %d bytes: %d bytes long, want %d", size, len(outboard), want)
	}
	if h := binary.LittleEndian.Uint64(outboard); h != uint64(size) {
		return fmt.Errorf("outboard of %d bytes: header says %d bytes", size, h)
	}
	if size == 0 && Of(nil) != d {
		return fmt.Errorf("outboard of 0 bytes: digest %s is not the digest of no bytes: %w", d, ErrMismatch)
	}
	if at, ok := checkParents(outboard[8:], sumCV(d[:]), uint64(size), guts.FlagRoot, 0); !ok {
		return fmt.Errorf("outboard of %d bytes: parent node at byte %d does not hash to %s: %w", size, 8+at, d, ErrMismatch)
	}
	return nil
}

// outboardLen is OutboardSize without its int overflow for huge sizes: the
// header and one pair of chaining values per group but one.
func outboardLen(size int64) int64 {
	if size == 0 {
		return 8
	}
	return 8 + 64*((size-1)/GroupSize)
}

// checkParents reports whether the parents of the subtree over n bytes,
// pre-order from ob[at:], hash to cv under flags. On failure it returns the
// offset in ob of the parent node that did not. The caller has checked
// that ob is as long as the tree needs.
func checkParents(ob []byte, cv [8]uint32, n uint64, flags uint32, at int) (int, bool) {
	if n <= GroupSize {
		return 0, true // a leaf group: its bytes are not in the outboard
	}
	if at < 0 || at+64 > len(ob) {
		return at, false
	}
	l, r := sumCV(ob[at:]), sumCV(ob[at+32:])
	if guts.ChainingValue(guts.ParentNode(l, r, &guts.IV, flags)) != cv {
		return at, false
	}
	mid := leftLen(n)
	if bad, ok := checkParents(ob, l, mid, 0, at+64); !ok {
		return bad, false
	}
	return checkParents(ob, r, n-mid, 0, at+64+64*parents(mid))
}
