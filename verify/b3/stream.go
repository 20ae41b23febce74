package b3

import (
	"fmt"
	"io"

	"lukechampine.com/blake3"
)

// hashBuf is how many bytes a Hasher collects before it hashes them: the
// BLAKE3 package hashes large writes several times faster than the 32 KiB
// ones io.Copy makes.
const hashBuf = 1 << 20

// Hasher computes the BLAKE3 digest of the bytes written to it, for code
// that sees member bytes as a stream: a store hashes what it writes with
// one. Make one with NewHasher; it is not safe for concurrent use.
type Hasher struct {
	h   *blake3.Hasher
	buf []byte // up to hashBuf bytes not yet given to h
}

// NewHasher returns a Hasher of no bytes yet.
func NewHasher() *Hasher { return &Hasher{h: blake3.New(32, nil)} }

// Write adds p to the hashed bytes. It never fails.
func (h *Hasher) Write(p []byte) (int, error) {
	n := len(p)
	if len(h.buf) == 0 && len(p) >= hashBuf {
		h.h.Write(p)
		return n, nil
	}
	for len(p) > 0 {
		if h.buf == nil {
			h.buf = make([]byte, 0, hashBuf)
		}
		k := copy(h.buf[len(h.buf):cap(h.buf)], p)
		h.buf, p = h.buf[:len(h.buf)+k], p[k:]
		if len(h.buf) == cap(h.buf) {
			h.h.Write(h.buf)
			h.buf = h.buf[:0]
		}
	}
	return n, nil
}

// Sum returns the digest of the bytes written so far.
func (h *Hasher) Sum() Sum {
	h.h.Write(h.buf)
	h.buf = h.buf[:0]
	var s Sum
	h.h.Sum(s[:0])
	return s
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
	if _, err := io.CopyBuffer(h, r, make([]byte, 1<<20)); err != nil {
		return err
	}
	return h.Check(want)
}
