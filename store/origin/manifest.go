package origin

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/tier"
)

// manifest answers the manifest under key, of digest hexd, once it checks
// out against its name (tier.Check). A manifest is checked whole (its
// digest is that of its canonical form), so the bytes held at once for
// manifests are bounded by Config.ManifestBudget: a request reserves the
// size the store gives (store.MaxManifest when it gives none) before it
// reads, waiting at most Config.QueueWait for it, and keeps it until its
// answer is written.
func (h *Handler) manifest(w http.ResponseWriter, r *http.Request, key, kind, hexd string) {
	what := "manifest " + hexd
	rc, size, err := h.open(r.Context(), key, store.MaxManifest)
	if err != nil {
		h.failed(w, kindManifest, what, err)
		return
	}
	defer rc.Close()
	if size > store.MaxManifest {
		h.failed(w, kindManifest, what, store.TooLarge(key, store.MaxManifest))
		return
	}
	need := size
	if need < 0 {
		need = store.MaxManifest
	}
	took := h.manifests.acquire(r.Context(), max(need, 1), h.cfg.QueueWait)
	if took == 0 {
		w.Header().Set("Retry-After", "1")
		h.refuse(w, kindManifest, http.StatusServiceUnavailable, "busy: too many manifests being checked")
		return
	}
	defer h.manifests.release(took)
	b, err := store.ReadAtMost(rc, size, store.MaxManifest, key)
	if err == nil {
		err = tier.Check(kind, hexd, b)
	}
	if err != nil {
		h.failed(w, kindManifest, what, err)
		return
	}
	h.ok(w, r, kindManifest, tier.MetaETag(kind, hexd), b)
}

// budget is a number of bytes shared by requests: each takes what it
// needs (at most the whole budget), waiting for others to give it back.
type budget struct {
	total int64
	mu    sync.Mutex
	left  int64
	freed chan struct{} // closed and replaced on every release
}

func newBudget(n int64) *budget { return &budget{total: n, left: n, freed: make(chan struct{})} }

// acquire takes n bytes (the whole budget if n is more), waiting at most
// wait or until ctx ends; it returns how many it took, 0 if none.
func (b *budget) acquire(ctx context.Context, n int64, wait time.Duration) int64 {
	n = min(n, b.total)
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		b.mu.Lock()
		if b.left >= n {
			b.left -= n
			b.mu.Unlock()
			return n
		}
		ch := b.freed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-t.C:
			return 0
		case <-ctx.Done():
			return 0
		}
	}
}

// release gives back n bytes that acquire took.
func (b *budget) release(n int64) {
	b.mu.Lock()
	b.left += n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}
