package origin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/pinfs/pinfs/store/tier"
	"github.com/pinfs/pinfs/verify/b3"
)

// opener is a store that streams a blob (the backends, health.Store).
type opener interface {
	Open(ctx context.Context, key string) (io.ReadCloser, int64, error)
}

// holdBack is the tail of a member table kept from the client until its
// digest is known.
const holdBack = 64 << 10

// table streams the member table under key, whose SHA-256 must be hexd.
// Its last holdBack bytes go out only once the digest matched: a mismatch
// ends the response short of its length (the connection is cut), which a
// cache does not keep and a reader sees as a cut body.
func (h *Handler) table(w http.ResponseWriter, r *http.Request, key, hexd string) {
	var (
		rc   io.ReadCloser
		size int64 = -1
		err  error
	)
	if o, ok := h.cfg.Store.(opener); ok {
		rc, size, err = o.Open(r.Context(), key)
	} else {
		var b []byte
		b, err = h.cfg.Store.Get(r.Context(), key)
		rc, size = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	}
	if err != nil {
		h.failed(w, kindTable, "member table "+hexd, err)
		return
	}
	defer rc.Close()
	hd := w.Header()
	hd.Set("Cache-Control", tier.CacheControl)
	hd.Set("ETag", tier.MetaETag("members/sha256", hexd))
	hd.Set("Content-Type", "application/octet-stream")
	if size >= 0 {
		hd.Set("Content-Length", strconv.FormatInt(size, 10))
	}
	if r.Method == http.MethodHead {
		h.requests.WithLabelValues(kindTable, "200").Inc()
		return
	}
	sum := sha256.New()
	buf := make([]byte, 2*holdBack)
	held, sent := 0, int64(0)
	for {
		n, rerr := io.ReadFull(rc, buf[held:])
		held += n
		sum.Write(buf[held-n : held])
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			h.cut(kindTable, hexd, sent, fmt.Errorf("reading the store: %w", rerr))
		}
		// Send all but the last holdBack bytes.
		if _, err := w.Write(buf[:held-holdBack]); err != nil {
			return // the client went away
		}
		sent += int64(held - holdBack)
		held = copy(buf, buf[held-holdBack:held])
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != hexd {
		h.cut(kindTable, hexd, sent, fmt.Errorf("the store's copy has SHA-256 %s: %w", got, b3.ErrMismatch))
	}
	if size >= 0 && sent+int64(held) != size {
		h.cut(kindTable, hexd, sent, fmt.Errorf("the store's copy is %d bytes, it said %d", sent+int64(held), size))
	}
	if _, err := w.Write(buf[:held]); err != nil {
		return
	}
	h.requests.WithLabelValues(kindTable, "200").Inc()
	h.served.WithLabelValues(kindTable).Add(float64(sent + int64(held)))
}

// cut ends a response already begun, short of its length, after logging why.
func (h *Handler) cut(kind, hexd string, sent int64, err error) {
	h.cfg.Log.Error("origin: member table cut short: never served unverified", "table", hexd, "sent", sent, "err", err)
	h.requests.WithLabelValues(kind, "cut").Inc()
	panic(http.ErrAbortHandler)
}
