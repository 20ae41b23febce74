package b3

import (
	"encoding/binary"
	"math/bits"

	"lukechampine.com/blake3/guts"
)

// Of, Hasher and Verify walk the BLAKE3 tree themselves over guts, the compression
// kernels of lukechampine.com/blake3 (AVX-512 or AVX2 for 16 or 8 chunks at
// once, generic Go for a single node), on the calling goroutine: the
// package's own Hasher (and Sum256) starts a goroutine for every 16 KiB of
// a large write, which keeps two CPUs busy for the speed of one and a half
// and costs goroutines for every small member hashed whole; bao's
// VerifyChunk clears a 16 KiB buffer and a stack of chaining values for
// every group (BenchmarkVerifyBlock compares both).
//
// node copies each 16 KiB into a scratch buffer before the kernel reads
// it, as bao does: the kernels load 8 or 16 chunks 1 KiB apart, and on the
// AVX2 machine of issue 10 they ran about 20 % slower reading the caller's
// slice in place than the copied one, in or out of the caches
// (BenchmarkKernel measures both).

// simdBytes is what one guts.CompressBuffer call hashes: 16 chunks.
const simdBytes = guts.MaxSIMD * guts.ChunkSize

// node returns the root node, not yet compressed, of the BLAKE3 subtree
// over p, whose first chunk is chunk number counter of the input. p is a
// whole subtree: a power of two of chunks, or the input's last bytes. buf
// is scratch space.
func node(p []byte, counter uint64, buf *[simdBytes]byte) guts.Node {
	switch {
	case len(p) <= guts.ChunkSize:
		return guts.CompressChunk(p, &guts.IV, counter, 0)
	case len(p) <= simdBytes:
		copy(buf[:], p)
		return guts.CompressBuffer(buf, len(p), &guts.IV, counter, 0)
	}
	mid := leftLen(uint64(len(p)))
	l := guts.ChainingValue(node(p[:mid], counter, buf))
	r := guts.ChainingValue(node(p[mid:], counter+mid/guts.ChunkSize, buf))
	return guts.ParentNode(l, r, &guts.IV, 0)
}

// leftLen is the length of the left subtree of a tree over n > 1024
// bytes: the largest power of two below n.
func leftLen(n uint64) uint64 { return 1 << (bits.Len64(n-1) - 1) }

// rootSum compresses n as the root of the tree into a digest.
func rootSum(n guts.Node) Sum {
	n.Flags |= guts.FlagRoot
	return cvSum(guts.ChainingValue(n))
}

func cvSum(cv [8]uint32) Sum {
	var s Sum
	for i, w := range cv {
		binary.LittleEndian.PutUint32(s[4*i:], w)
	}
	return s
}

func sumCV(s []byte) [8]uint32 {
	var cv [8]uint32
	_ = s[31]
	for i := range cv {
		cv[i] = binary.LittleEndian.Uint32(s[4*i:])
	}
	return cv
}

// parents is the number of parent nodes a Bao outboard holds for a subtree
// of n > 0 bytes: one fewer than its groups.
func parents(n uint64) int { return int((n+GroupSize-1)/GroupSize) - 1 }

// outboardWalk verifies data, the bytes [off, off+len(data)) of a member,
// against a Bao outboard (without its 8-byte length): pre-order pairs of
// child chaining values for every subtree larger than a group.
type outboardWalk struct {
	data []byte
	ob   []byte
	off  uint64
	buf  [simdBytes]byte // node's scratch space
}

// verify reports whether the subtree over [pos, pos+n), whose parents
// start at ob[at:], has chaining value cv under flags, checking only the
// subtrees that overlap data. Every group that overlaps data lies wholly
// inside it (the caller checks the alignment).
func (w *outboardWalk) verify(cv [8]uint32, pos, n uint64, flags uint32, at int) bool {
	if n <= GroupSize {
		start := pos - w.off
		if start > uint64(len(w.data)) || n > uint64(len(w.data))-start {
			return false // a range the caller did not align
		}
		nd := node(w.data[start:start+n], pos/guts.ChunkSize, &w.buf)
		nd.Flags |= flags
		return guts.ChainingValue(nd) == cv
	}
	if at < 0 || at+64 > len(w.ob) {
		return false
	}
	l, r := sumCV(w.ob[at:]), sumCV(w.ob[at+32:])
	if guts.ChainingValue(guts.ParentNode(l, r, &guts.IV, flags)) != cv {
		return false
	}
	mid := leftLen(n)
	end := w.off + uint64(len(w.data))
	if w.off < pos+mid && !w.verify(l, pos, mid, 0, at+64) {
		return false
	}
	if end > pos+mid && !w.verify(r, pos+mid, n-mid, 0, at+64+64*parents(mid)) {
		return false
	}
	return true
}
