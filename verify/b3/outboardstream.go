package b3

import (
	"encoding/binary"
	"fmt"

	"lukechampine.com/blake3/guts"
)

// OutboardStream checks a Bao outboard as its bytes arrive, as
// CheckOutboard checks a whole one, for a reader that must not hold an
// outboard of up to a gigabyte to learn whether it is good (pinfs serve).
// Make one with NewOutboardStream and Write the outboard to it in order;
// it is not safe for concurrent use.
//
// The 8-byte header comes first: once it is in, Size and Len say what the
// rest must be, so a reader can refuse a length it will not serve before
// any more is read. Then each 64-byte parent node, pre-order, is compared
// with the chaining value its parent names as soon as its 64 bytes are
// in: the stream keeps a stack of the chaining values still expected,
// one a level of the tree (at most 2 × 64 entries whatever the size), and
// the 64 bytes of one partial node, never more.
//
// Verified is the prefix known good so far: nothing until the root node
// (or, for a member of at most GroupSize bytes, the whole header)
// checked, then the header and every node checked. A prefix of an
// outboard that Verified covers is the prefix of the only outboard that
// can pass.
type OutboardStream struct {
	d        Sum
	size     int64 // from the header; -1 before it
	want     int64 // the outboard's length, from size
	got      int64 // bytes written so far
	verified int64
	hdr      [8]byte
	node     [64]byte
	nn       int // bytes of node held
	stack    []pending
	err      error
}

// pending is a subtree whose parent node is still to come: over n bytes,
// with chaining value cv under flags.
type pending struct {
	cv    [8]uint32
	n     uint64
	flags uint32
}

// NewOutboardStream returns a stream checking the outboard of the member
// with digest d.
func NewOutboardStream(d Sum) *OutboardStream { return &OutboardStream{d: d, size: -1} }

// maxOutboardSize bounds the size a header may claim, as tier.Check does.
const maxOutboardSize = 1 << 62

// Size returns the member's size the header claims, once it is in.
func (s *OutboardStream) Size() (int64, bool) { return s.size, s.size >= 0 }

// Len returns the length the outboard must have, once the header is in.
func (s *OutboardStream) Len() (int64, bool) { return s.want, s.size >= 0 }

// Verified returns how many bytes of the outboard, from its start, are
// known good.
func (s *OutboardStream) Verified() int64 { return s.verified }

// Write checks p, the next bytes of the outboard. It returns the number
// of bytes of p consumed and, at the first byte that cannot belong to
// an outboard with digest d, an error (wrapping ErrMismatch for a tree
// that does not hash to d); every later Write returns that error again.
// Bytes past the length the header implies are an error.
func (s *OutboardStream) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n := 0
	for len(p) > 0 {
		if s.size < 0 {
			k := copy(s.hdr[s.got:], p)
			s.got += int64(k)
			p, n = p[k:], n+k
			if s.got == 8 {
				if err := s.header(); err != nil {
					return n, s.fail(err)
				}
			}
			continue
		}
		if s.got == s.want {
			return n, s.fail(fmt.Errorf("outboard of %d bytes: longer than its %d bytes", s.size, s.want))
		}
		k := copy(s.node[s.nn:], p)
		s.nn += k
		s.got += int64(k)
		p, n = p[k:], n+k
		if s.nn == 64 {
			if err := s.parent(); err != nil {
				return n, s.fail(err)
			}
		}
	}
	return n, nil
}

// header reads the size from the header and sets up the tree's root.
func (s *OutboardStream) header() error {
	h := binary.LittleEndian.Uint64(s.hdr[:])
	if h > maxOutboardSize {
		return fmt.Errorf("outboard: header says %d bytes: %w", h, ErrMismatch)
	}
	s.size = int64(h)
	s.want = outboardLen(s.size)
	if s.size == 0 && Of(nil) != s.d {
		return fmt.Errorf("outboard of 0 bytes: digest %s is not the digest of no bytes: %w", s.d, ErrMismatch)
	}
	if s.size <= GroupSize {
		s.verified = 8
		return nil
	}
	s.stack = append(s.stack, pending{cv: sumCV(s.d[:]), n: uint64(s.size), flags: guts.FlagRoot})
	return nil
}

// parent checks the node just completed against the chaining value on
// top of the stack and pushes its children that have parents of their own.
func (s *OutboardStream) parent() error {
	at := s.got - 64
	if len(s.stack) == 0 { // cannot happen: the length bounds the nodes
		return fmt.Errorf("outboard of %d bytes: node at byte %d past the tree", s.size, at)
	}
	top := s.stack[len(s.stack)-1]
	s.stack = s.stack[:len(s.stack)-1]
	l, r := sumCV(s.node[:32]), sumCV(s.node[32:])
	if guts.ChainingValue(guts.ParentNode(l, r, &guts.IV, top.flags)) != top.cv {
		return fmt.Errorf("outboard of %d bytes: parent node at byte %d does not hash to %s: %w", s.size, at, s.d, ErrMismatch)
	}
	s.nn = 0
	mid := leftLen(top.n)
	// Pre-order: the left subtree's nodes come first, so it goes on top.
	if top.n-mid > GroupSize {
		s.stack = append(s.stack, pending{cv: r, n: top.n - mid})
	}
	if mid > GroupSize {
		s.stack = append(s.stack, pending{cv: l, n: mid})
	}
	s.verified = s.got
	return nil
}

func (s *OutboardStream) fail(err error) error {
	s.err = err
	return err
}

// Close reports whether the whole outboard came and checked: nil only
// if Verified is its full length.
func (s *OutboardStream) Close() error {
	switch {
	case s.err != nil:
		return s.err
	case s.size < 0:
		return fmt.Errorf("outboard: %d bytes, shorter than its header", s.got)
	case s.got != s.want:
		return fmt.Errorf("outboard of %d bytes: %d bytes long, want %d", s.size, s.got, s.want)
	}
	return nil
}
