// Package b3 computes BLAKE3 digests and Bao outboard encodings of member
// bytes, and verifies ranges of a member against its digest.
//
// pinfs uses lukechampine.com/blake3 because its bao package verifies any
// aligned range of an object against the object's plain BLAKE3 digest with
// the help of an outboard tree (the README records the benchmark behind the
// choice). The outboard uses chunk groups of 2^GroupLog BLAKE3 chunks
// (GroupSize bytes), so it costs 64 bytes per 64 KiB of data (about 0.1 %).
// An outboard is not trusted: a tampered outboard makes verification fail,
// it can never make bad bytes pass.
package b3

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"lukechampine.com/blake3/bao"
	"lukechampine.com/blake3/guts"
)

const (
	// GroupLog is log2 of the BLAKE3 chunks (1 KiB each) per verified group.
	GroupLog = 6
	// GroupSize is the verification granularity in bytes (64 KiB). Ranges
	// passed to Verify start at a multiple of GroupSize.
	GroupSize = 1024 << GroupLog
	// Prefix starts every textual BLAKE3 digest.
	Prefix = "blake3:"
)

// ErrMismatch reports bytes that do not match the expected digest.
var ErrMismatch = errors.New("blake3 digest mismatch")

// Sum is a BLAKE3-256 digest.
type Sum [32]byte

// String returns "blake3:<64 hex>", the form b3sum prints after the prefix.
func (s Sum) String() string { return Prefix + hex.EncodeToString(s[:]) }

// Hex returns the 64 lower-case hex digits of s.
func (s Sum) Hex() string { return hex.EncodeToString(s[:]) }

// Parse parses "blake3:<64 lower-case hex>".
func Parse(s string) (Sum, error) {
	var d Sum
	h, ok := strings.CutPrefix(s, Prefix)
	if !ok || len(h) != 64 || strings.ToLower(h) != h {
		return d, fmt.Errorf("digest %q: not blake3:<64 lower-case hex>", s)
	}
	if _, err := hex.Decode(d[:], []byte(h)); err != nil {
		return d, fmt.Errorf("digest %q: %v", s, err)
	}
	return d, nil
}

// Of returns the BLAKE3 digest of b.
func Of(b []byte) Sum {
	var buf [simdBytes]byte
	return rootSum(node(b, 0, &buf))
}

// OutboardSize returns the size of the Bao outboard for size bytes of data.
func OutboardSize(size int64) int { return bao.EncodedSize(int(size), GroupLog, true) }

// Encode reads exactly size bytes from r and returns their digest and Bao
// outboard. It fails if r ends early or has more bytes than size.
func Encode(r io.Reader, size int64) (Sum, []byte, error) {
	w := &sliceWriter{b: make([]byte, OutboardSize(size))}
	cr := &countReader{r: r}
	root, err := bao.Encode(w, cr, size, GroupLog, true)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Sum{}, nil, fmt.Errorf("hashing %d bytes: %w (read %d)", size, err, cr.n)
	}
	var one [1]byte
	if n, _ := io.ReadFull(r, one[:]); n != 0 {
		return Sum{}, nil, fmt.Errorf("hashing: object is longer than its %d bytes", size)
	}
	return root, w.b, nil
}

// Verify reports whether data, which starts at offset off of a member of
// the given size, matches digest d under outboard. off must be a multiple of
// GroupSize and data must end at a multiple of GroupSize or at the end of
// the member. A nil error means every byte of data is authentic.
func Verify(d Sum, outboard []byte, size, off int64, data []byte) error {
	end := off + int64(len(data))
	switch {
	case off < 0 || off%GroupSize != 0:
		return fmt.Errorf("verify: offset %d is not aligned to %d", off, GroupSize)
	case off > size-int64(len(data)): // not end > size: end may overflow
		return fmt.Errorf("verify: range %d+%d beyond size %d", off, len(data), size)
	case end != size && end%GroupSize != 0:
		return fmt.Errorf("verify: range end %d is not aligned to %d", end, GroupSize)
	case size == 0:
		if Of(nil) != d {
			return ErrMismatch
		}
		return nil
	case len(data) == 0:
		return nil
	case len(outboard) != OutboardSize(size) || int64(binary.LittleEndian.Uint64(outboard)) != size:
		return fmt.Errorf("verify: outboard does not describe %d bytes: %w", size, ErrMismatch)
	}
	w := &outboardWalk{data: data, ob: outboard[8:], off: uint64(off)}
	if !w.verify(sumCV(d[:]), 0, uint64(size), guts.FlagRoot, 0) {
		return ErrMismatch
	}
	return nil
}

type sliceWriter struct{ b []byte }

func (w *sliceWriter) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(w.b)) {
		return 0, errors.New("outboard write out of range")
	}
	return copy(w.b[off:], p), nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
