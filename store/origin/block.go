package origin

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/store/pool"
	"github.com/pinfs/pinfs/store/tier"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// block answers a block URL: the hint's snapshot must be in the store and
// name the URL's digest at the hint's ordinal. What that costs before
// anything is verified is bounded by snapshots.
func (h *Handler) block(w http.ResponseWriter, r *http.Request, path string) {
	b, err := tier.ParseBlock(path, r.URL.Query())
	if err != nil {
		h.refuse(w, kindBlock, http.StatusBadRequest, err.Error())
		return
	}
	m, err := h.snaps.member(r.Context(), verify.Digest(b.Snapshot), b.Member)
	if errors.Is(err, errNoMember) {
		h.refuse(w, kindBlock, http.StatusNotFound, fmt.Sprintf("snapshot %s has no member %d", b.Snapshot, b.Member))
		return
	}
	if err != nil {
		h.failed(w, kindBlock, "snapshot "+b.Snapshot, err)
		return
	}
	if m.Digest != b3.Prefix+b.Hex {
		h.refuse(w, kindBlock, http.StatusNotFound, fmt.Sprintf("member %d of snapshot %s is not %s%s", b.Member, b.Snapshot, b3.Prefix, b.Hex))
		return
	}
	// Blocks are counted, not multiplied: an index near 2^63 / BlockSize
	// must not overflow into a negative offset. An empty member has none.
	if b.Index < 0 || b.Index >= (m.Size+tier.BlockSize-1)/tier.BlockSize {
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
	// The response holds the block in the pool until it is written.
	sp, got, err := h.cfg.Blocks.Slices(r.Context(), &bm, off, n)
	sp.As(pool.Serve)
	defer sp.Release()
	if err != nil && !errors.Is(err, io.EOF) || got != n {
		if err == nil || errors.Is(err, io.EOF) {
			err = fmt.Errorf("%d of %d bytes", got, n)
		}
		h.failed(w, kindBlock, fmt.Sprintf("block %d of %s", b.Index, m.Path), err)
		return
	}
	vs := sp.Vecs()
	data := vs[0]
	if len(vs) != 1 {
		data = make([]byte, 0, n)
		for _, v := range vs {
			data = append(data, v...)
		}
	}
	h.ok(w, r, kindBlock, b.ETag(), data)
}
