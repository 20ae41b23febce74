package blocks

import "github.com/pinfs/pinfs/store/pool"

// Span is the verified bytes of one read: sub-slices of pool blocks,
// which the Span holds (pool.Reader) until Release. A FUSE reply releases
// it once the kernel has the bytes, pinfs serve once the response is
// written, ReadAt once it has copied them.
type Span struct {
	vecs [][]byte
	blks []*pool.Block
	h    pool.Holder // whose references they are: pool.Reader unless As says
}

// As hands the Span's references to holder h (pinfs serve's responses:
// pool.Serve), so that the pool counts them under h.
func (s *Span) As(h pool.Holder) {
	for _, b := range s.blks {
		b.Move(s.h, h)
	}
	s.h = h
}

// add appends b's bytes [lo, hi) to s, which takes over the caller's
// reference to b (pool.Reader; s must not have been handed on with As),
// and returns hi-lo.
func (s *Span) add(b *pool.Block, lo, hi int) int {
	s.vecs = append(s.vecs, b.Bytes()[lo:hi])
	s.blks = append(s.blks, b)
	return hi - lo
}

// Vecs returns the bytes, in order. They are valid until Release.
func (s *Span) Vecs() [][]byte {
	if s == nil {
		return nil
	}
	return s.vecs
}

// Release gives the blocks back. A Span is released once; Release on a
// nil or empty Span does nothing.
func (s *Span) Release() {
	if s == nil {
		return
	}
	for _, b := range s.blks {
		b.Release(s.h)
	}
	s.blks, s.vecs = nil, nil
}
