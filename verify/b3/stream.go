package b3

import (
	"fmt"
	"io"
	"math/bits"

	"lukechampine.com/blake3/guts"
)

// hashBuf is the unit a Hasher hashes: a 1 MiB subtree of the BLAKE3
// tree (a power of two of chunks), hashed straight from a Write that holds
// one whole and from the Hasher's buffer otherwise.
const hashBuf = 1 << 20

// Hasher computes the BLAKE3 digest of the bytes written to it, for code
// that sees member bytes as a stream: a store hashes what it writes with
// one. Make one with NewHasher; it is not safe for concurrent use.
type Hasher struct {
	// stack holds the chaining values of the complete subtrees hashed so
	// far, stack[i] one of 2^i MiB when bit i of done is set.
	stack [64 - 20][8]uint32
	done  uint64 // MiB pushed onto stack
	// last is the node of the MiB after them, held back because it is
	// the root if no byte follows; hasLast tells whether there is one.
	last    guts.Node
	hasLast bool
	buf     []byte // up to hashBuf bytes after those, not yet hashed
	scratch [simdBytes]byte
}

// NewHasher returns a Hasher of no bytes yet.
func NewHasher() *Hasher { return &Hasher{} }

// Write adds p to the hashed bytes. It never fails.
func (h *Hasher) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if len(h.buf) == 0 && len(p) >= hashBuf {
			h.hashMiB(p[:hashBuf])
			p = p[hashBuf:]
			continue
		}
		if h.buf == nil {
			h.buf = make([]byte, 0, hashBuf)
		}
		k := copy(h.buf[len(h.buf):cap(h.buf)], p)
		h.buf, p = h.buf[:len(h.buf)+k], p[k:]
		if len(h.buf) == cap(h.buf) {
			h.hashMiB(h.buf)
			h.buf = h.buf[:0]
		}
	}
	return n, nil
}

// hashMiB hashes the next MiB of the input and holds its node back.
func (h *Hasher) hashMiB(p []byte) {
	h.pushLast()
	h.last, h.hasLast = node(p, h.done*(hashBuf/guts.ChunkSize), &h.scratch), true
}

// pushLast pushes the held-back MiB onto the stack: bytes follow it.
func (h *Hasher) pushLast() {
	if !h.hasLast {
		return
	}
	cv := guts.ChainingValue(h.last)
	i := 0
	for ; h.done&(1<<i) != 0; i++ {
		cv = guts.ChainingValue(guts.ParentNode(h.stack[i], cv, &guts.IV, 0))
	}
	h.stack[i] = cv
	h.done++
	h.hasLast = false
}

// Sum returns the digest of the bytes written so far.
func (h *Hasher) Sum() Sum {
	var n guts.Node
	switch {
	case len(h.buf) > 0:
		h.pushLast()
		n = node(h.buf, h.done*(hashBuf/guts.ChunkSize), &h.scratch)
	case h.hasLast:
		n = h.last
	default:
		n = node(nil, 0, nil) // no bytes at all (done is 0)
	}
	for i := bits.TrailingZeros64(h.done); i < bits.Len64(h.done); i++ {
		if h.done&(1<<i) != 0 {
			n = guts.ParentNode(h.stack[i], guts.ChainingValue(n), &guts.IV, 0)
		}
	}
	return rootSum(n)
}

// Check reports whether h's bytes hash to want, with an error wrapping
// ErrMismatch that names both digests if they do not.
func (h *Hasher) Check(want Sum) error {
	if got := h.Sum(); got != want {
		return fmt.Errorf("bytes hash to %v, not %v: %w", got, want, ErrMismatch)
	}
	return nil
}

// Check reads r to its end and reports, as Hasher.Check does, whether its
// bytes hash to want. A read error is returned as it is.
func Check(r io.Reader, want Sum) error {
	h := NewHasher()
	if _, err := io.CopyBuffer(h, r, make([]byte, hashBuf)); err != nil {
		return err
	}
	return h.Check(want)
}
