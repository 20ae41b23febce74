package origin

import (
	"context"
	"slices"
	"time"

	"github.com/pinfs/pinfs/verify"
)

// snapshot returns snapshot d, loaded and verified from Config.Meta: one
// load per digest, shared by the requests that wait for it and run on
// its own context, so that a request that gives up fails no other. The
// Config.Snapshots last loaded are kept; a failed load is not. A table
// loaded from the cache dir's index stays mapped after it is dropped here
// (verify.Table has no Close): the origin's address space grows by each
// big table it serves, its resident memory does not.
func (h *Handler) snapshot(ctx context.Context, d verify.Digest) (*verify.Snapshot, error) {
	h.mu.Lock()
	l, ok := h.snaps[d]
	if !ok {
		l = &snapLoad{done: make(chan struct{})}
		h.snaps[d] = l
		h.order = append(h.order, d)
		for len(h.order) > h.cfg.Snapshots {
			delete(h.snaps, h.order[0])
			h.order = h.order[1:]
		}
		go h.load(d, l)
	}
	h.mu.Unlock()
	select {
	case <-l.done:
		return l.snap, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// load loads d into l; a failure is forgotten so that the next request
// tries again.
func (h *Handler) load(d verify.Digest, l *snapLoad) {
	defer close(l.done)
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	l.snap, l.err = verify.Load(ctx, h.cfg.Meta, d)
	if l.err == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.snaps[d] == l {
		delete(h.snaps, d)
		if i := slices.Index(h.order, d); i >= 0 {
			h.order = slices.Delete(h.order, i, i+1)
		}
	}
}

// loadTimeout bounds the load of one snapshot (ten million members take
// seconds from an index, a minute or so from the store).
const loadTimeout = 10 * time.Minute
