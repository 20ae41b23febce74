package store

import "io"

// ExactReader returns a reader of exactly n bytes of rc. It stops after n
// bytes even if rc has more, and reports io.ErrUnexpectedEOF when rc ends
// before n bytes. A negative n passes rc through unchanged. Close closes rc.
//
// Backends wrap the bodies they return from ReadRange with it, so that a
// truncated file or a cut connection can never look like a clean end.
func ExactReader(rc io.ReadCloser, n int64) io.ReadCloser {
	if n < 0 {
		return rc
	}
	return &exactReader{rc: rc, left: n}
}

type exactReader struct {
	rc   io.ReadCloser
	left int64
}

func (r *exactReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.rc.Read(p)
	r.left -= int64(n)
	switch {
	case err == io.EOF && r.left > 0:
		return n, io.ErrUnexpectedEOF
	case err == io.EOF:
		return n, io.EOF
	case err == nil && r.left == 0:
		return n, io.EOF
	}
	return n, err
}

func (r *exactReader) Close() error { return r.rc.Close() }
