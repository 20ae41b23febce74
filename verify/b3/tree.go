package b3

import (
	"encoding/binary"
	"math/bits"

	"lukechampine.com/blake3/guts"
)

// Of and Hasher walk the BLAKE3 tree themselves over guts, the compression
// kernels of lukechampine.com/blake3 (AVX-512 or AVX2 for 16 or 8 chunks at
// once, generic Go for a single node), on the calling goroutine: the
// package's own Hasher (and Sum256) starts a goroutine for every 16 KiB of
// a large write, which keeps two CPUs busy for the speed of one and a half
// and costs goroutines for every small member hashed whole.
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
