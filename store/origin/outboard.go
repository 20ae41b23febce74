package origin

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/pinfs/pinfs/store/tier"
	"github.com/pinfs/pinfs/verify/b3"
)

// maxOutboard bounds an outboard the origin serves: that of a member of
// 1 TiB (about 1/1000 of the member's size). A header that implies a
// longer one is refused before anything else is read.
const maxOutboard = 1 << 30

// outboardBuf is what the origin holds of an outboard at a time: a whole
// number of parent nodes, checked before they go out.
const outboardBuf = 64 << 10

// outboard streams the outboard under key, of the member of BLAKE3 digest
// hexd, checking it as it goes (b3.OutboardStream): its 8-byte header
// first, which gives the length it must have (refused if the store says
// another or it is over maxOutboard), then its root node; only then does
// the answer begin, with that length. The rest goes out outboardBuf bytes
// at a time, each checked node by node before it is sent, the last only
// once the store's copy is known to end there. A failure after the answer
// began cuts it short of its Content-Length, which no cache keeps.
func (h *Handler) outboard(w http.ResponseWriter, r *http.Request, key, hexd string) {
	what := "outboard " + hexd
	d, err := b3.Parse(b3.Prefix + hexd)
	if err != nil {
		h.refuse(w, kindOutboard, http.StatusBadRequest, what+": not a BLAKE3 digest")
		return
	}
	rc, size, err := h.open(r.Context(), key, maxOutboard)
	if err != nil {
		h.failed(w, kindOutboard, what, err)
		return
	}
	defer rc.Close()
	s := b3.NewOutboardStream(d)
	buf := make([]byte, outboardBuf)
	// The header and the root node, before the answer begins.
	head := buf[:8]
	if _, err := io.ReadFull(rc, head); err != nil {
		h.failed(w, kindOutboard, what, short(err, "header"))
		return
	}
	if _, err := s.Write(head); err != nil {
		h.failed(w, kindOutboard, what, err)
		return
	}
	want, _ := s.Len()
	switch {
	case want > maxOutboard:
		h.failed(w, kindOutboard, what, fmt.Errorf("its header implies %d bytes, more than %d: %w", want, maxOutboard, b3.ErrMismatch))
		return
	case size >= 0 && size != want:
		h.failed(w, kindOutboard, what, fmt.Errorf("the store's copy is %d bytes, its header implies %d: %w", size, want, b3.ErrMismatch))
		return
	}
	if want > 8 {
		head = buf[:72]
		if _, err := io.ReadFull(rc, head[8:]); err != nil {
			h.failed(w, kindOutboard, what, short(err, "root node"))
			return
		}
		s.Write(head[8:])
	}
	if s.Verified() != int64(len(head)) {
		h.failed(w, kindOutboard, what, s.Close())
		return
	}
	if want == 8 {
		if err := atEnd(rc); err != nil {
			h.failed(w, kindOutboard, what, err)
			return
		}
	}
	hd := w.Header()
	hd.Set("Cache-Control", tier.CacheControl)
	hd.Set("ETag", tier.MetaETag("bao/blake3", hexd))
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("Content-Length", strconv.FormatInt(want, 10))
	if r.Method == http.MethodHead {
		h.requests.WithLabelValues(kindOutboard, "200").Inc()
		return
	}
	if _, err := w.Write(head); err != nil {
		return // the client went away
	}
	sent := int64(len(head))
	for sent < want {
		chunk := buf[:min(int64(len(buf)), want-sent)]
		if _, err := io.ReadFull(rc, chunk); err != nil {
			h.cut(kindOutboard, what, sent, short(err, "nodes"))
		}
		if _, err := s.Write(chunk); err != nil {
			h.cut(kindOutboard, what, sent, err)
		}
		if sent+int64(len(chunk)) == want {
			if err := atEnd(rc); err != nil {
				h.cut(kindOutboard, what, sent, err)
			}
		}
		if _, err := w.Write(chunk); err != nil {
			return
		}
		sent += int64(len(chunk))
	}
	if err := s.Close(); err != nil { // cannot happen: every node checked
		h.cut(kindOutboard, what, sent, err)
	}
	h.requests.WithLabelValues(kindOutboard, "200").Inc()
	h.served.WithLabelValues(kindOutboard).Add(float64(sent))
}

// short turns the end of a store's copy met while reading part into an
// error wrapping b3.ErrMismatch (the copy is too short to be the
// outboard); other read errors are returned as they are.
func short(err error, part string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("the store's copy ends in its %s: %w", part, b3.ErrMismatch)
	}
	return fmt.Errorf("reading the store: %w", err)
}

// atEnd reports whether r has no byte left.
func atEnd(r io.Reader) error {
	var one [1]byte
	n, err := io.ReadFull(r, one[:])
	switch {
	case n > 0:
		return fmt.Errorf("the store's copy is longer than its header implies: %w", b3.ErrMismatch)
	case errors.Is(err, io.EOF):
		return nil
	}
	return fmt.Errorf("reading the store: %w", err)
}
