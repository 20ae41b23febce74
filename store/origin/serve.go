package origin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/store/tier"
	"github.com/pinfs/pinfs/verify"
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

// block answers a block URL: the hint's snapshot must be in the store and
// name the URL's digest at the hint's ordinal.
func (h *Handler) block(w http.ResponseWriter, r *http.Request, path string) {
	b, err := tier.ParseBlock(path, r.URL.Query())
	if err != nil {
		h.refuse(w, kindBlock, http.StatusBadRequest, err.Error())
		return
	}
	snap, err := h.snapshot(r.Context(), verify.Digest(b.Snapshot))
	if err != nil {
		h.failed(w, kindBlock, "snapshot "+b.Snapshot, err)
		return
	}
	t := snap.Table()
	if b.Member >= t.Len() {
		h.refuse(w, kindBlock, http.StatusNotFound, fmt.Sprintf("snapshot %s has no member %d", b.Snapshot, b.Member))
		return
	}
	m := t.Member(b.Member)
	if m.Digest != b3.Prefix+b.Hex {
		h.refuse(w, kindBlock, http.StatusNotFound, fmt.Sprintf("member %d of snapshot %s is not %s%s", b.Member, b.Snapshot, b3.Prefix, b.Hex))
		return
	}
	if b.Index*tier.BlockSize >= max(m.Size, 1) {
		h.refuse(w, kindBlock, http.StatusNotFound, fmt.Sprintf("member %s%s of %d bytes has no block %d", b3.Prefix, b.Hex, m.Size, b.Index))
		return
	}
	bm, err := blocks.MemberOf(verify.Digest(b.Snapshot), b.Member, &m)
	if err != nil {
		h.refuse(w, kindBlock, http.StatusNotFound, err.Error())
		return
	}
	off := b.Index * tier.BlockSize
	n := int(min(tier.BlockSize, m.Size-off))
	vs, got, err := h.cfg.Blocks.Slices(r.Context(), &bm, off, n)
	if err != nil && !errors.Is(err, io.EOF) || got != n {
		if err == nil || errors.Is(err, io.EOF) {
			err = fmt.Errorf("%d of %d bytes", got, n)
		}
		h.failed(w, kindBlock, fmt.Sprintf("block %d of %s", b.Index, m.Path), err)
		return
	}
	data := vs[0]
	if len(vs) != 1 {
		data = make([]byte, 0, n)
		for _, v := range vs {
			data = append(data, v...)
		}
	}
	h.ok(w, r, kindBlock, b.ETag(), data)
}
