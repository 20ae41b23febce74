package origin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/tier"
	"github.com/pinfs/pinfs/verify/b3"
)

// opener is a store that streams a blob (the backends, health.Store).
type opener interface {
	Open(ctx context.Context, key string) (io.ReadCloser, int64, error)
}

// open returns a reader of the blob under key and its size (-1 when
// unknown): streamed when the store can, else read whole, at most limit
// bytes.
func (h *Handler) open(ctx context.Context, key string, limit int64) (io.ReadCloser, int64, error) {
	if o, ok := h.cfg.Store.(opener); ok {
		return o.Open(ctx, key)
	}
	b, err := store.GetAtMost(ctx, h.cfg.Store, key, limit)
	if err != nil {
		return nil, 0, err
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}

// holdBack is the tail of a member table kept from the client until its
// digest is known.
const holdBack = 64 << 10

// fillTimeout bounds one read of a member table from the store, which
// goes on after its client left so that the copy it makes is kept.
const fillTimeout = 10 * time.Minute

// table streams the member table under key, whose SHA-256 must be hexd,
// from the origin's verified copy (tableCopies) when it has one, else from
// the store, keeping a copy as it goes. A bypass request
// (tier.BypassHeader) is a repair signal: it reads the store again, at
// most once a table per Config.TableRefresh; otherwise it gets the copy.
//
// Either way the bytes are hashed as they go and their last holdBack
// bytes go out only once the digest matched: a mismatch ends the response
// short of its length (the connection is cut), which a cache does not
// keep and a reader sees as a cut body. A copy that does not match is
// removed, and the next request reads the store.
func (h *Handler) table(w http.ResponseWriter, r *http.Request, key, hexd string) {
	what := "member table " + hexd
	head := r.Method == http.MethodHead
	src, err := h.tables.source(r.Context(), hexd, r.Header.Get(tier.BypassHeader) != "", head)
	if err != nil {
		h.failed(w, kindTable, what, err)
		return
	}
	defer src.done()
	rc, size := io.ReadCloser(src.local), src.size
	var fill *fillCopy
	if src.local == nil {
		// A read that keeps a copy runs to the end of the table even if
		// the client leaves, bounded by fillTimeout.
		ctx := r.Context()
		if src.fill {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), fillTimeout)
			defer cancel()
		}
		rc, size, err = h.open(ctx, key, store.MaxTable)
		if err != nil {
			h.failed(w, kindTable, what, err)
			return
		}
		if src.fill {
			h.tables.began(hexd)
			fill = h.tables.newFill(hexd)
		}
	}
	defer rc.Close()
	hd := w.Header()
	hd.Set("Cache-Control", tier.CacheControl)
	hd.Set("ETag", tier.MetaETag("members/sha256", hexd))
	hd.Set("Content-Type", "application/octet-stream")
	if size >= 0 {
		hd.Set("Content-Length", strconv.FormatInt(size, 10))
	}
	if head {
		h.requests.WithLabelValues(kindTable, "200").Inc()
		return
	}
	st := &tableStream{w: w, sum: sha256.New(), fill: fill}
	err = st.copy(rc, hexd, size)
	if kept := fill.end(st.verified); src.fill && st.verified && !kept {
		// No copy to serve the next request from: it reads the store.
		h.tables.forget(hexd)
		h.cfg.Log.Warn("origin: cannot keep a copy of a member table; it is read from the store every time",
			"table", hexd, "dir", h.cfg.TableDir)
	}
	if st.bad && src.local != nil {
		h.tables.drop(hexd, src.local)
	}
	switch {
	case err == nil:
		h.requests.WithLabelValues(kindTable, "200").Inc()
		h.served.WithLabelValues(kindTable).Add(float64(st.sent))
	case st.bad:
		h.cut(kindTable, what, st.sent, err)
	case !st.clientGone:
		h.cut(kindTable, what, st.sent, err) // a store that failed mid-way
	}
}

// tableStream copies a member table to a client, hashing it and holding
// its last holdBack bytes back until the hash is known; it writes what it
// reads to fill too, if any, and reads on for fill once the client is
// gone.
type tableStream struct {
	w          io.Writer
	sum        hash.Hash
	fill       *fillCopy
	sent       int64
	clientGone bool
	verified   bool // every byte read and the digest matched
	bad        bool // the bytes do not match their name
}

// errClientGone: the client stopped reading.
var errClientGone = errors.New("the client went away")

// copy streams rc, which should hold size bytes (-1: unknown) with
// SHA-256 hexd, and returns nil once every byte went out and matched.
func (t *tableStream) copy(rc io.Reader, hexd string, size int64) error {
	buf := make([]byte, 2*holdBack)
	held, total := 0, int64(0)
	for {
		if t.clientGone && t.fill == nil {
			return errClientGone
		}
		n, rerr := io.ReadFull(rc, buf[held:])
		held += n
		total += int64(n)
		t.sum.Write(buf[held-n : held])
		t.fill.write(buf[held-n : held])
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("reading the store: %w", rerr)
		}
		t.send(buf[:held-holdBack])
		held = copy(buf, buf[held-holdBack:held])
	}
	if got := hex.EncodeToString(t.sum.Sum(nil)); got != hexd {
		t.bad = true
		return fmt.Errorf("the copy has SHA-256 %s: %w", got, b3.ErrMismatch)
	}
	if size >= 0 && total != size {
		t.bad = true
		return fmt.Errorf("the copy is %d bytes, its source said %d: %w", total, size, b3.ErrMismatch)
	}
	t.verified = true
	t.send(buf[:held])
	if t.clientGone {
		return errClientGone
	}
	return nil
}

// send writes p to the client, unless it is gone.
func (t *tableStream) send(p []byte) {
	if t.clientGone || len(p) == 0 {
		return
	}
	if _, err := t.w.Write(p); err != nil {
		t.clientGone = true
		return
	}
	t.sent += int64(len(p))
}

// cut ends a response already begun, short of its length, after logging why.
func (h *Handler) cut(kind, what string, sent int64, err error) {
	h.cfg.Log.Error("origin: answer cut short: never served unverified", "kind", kind, "what", what, "sent", sent, "err", err)
	h.requests.WithLabelValues(kind, "cut").Inc()
	panic(http.ErrAbortHandler)
}
