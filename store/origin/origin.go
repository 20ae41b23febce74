// Package origin is the HTTP origin of a pinfs cluster (pinfs serve): it
// serves a store's content by the URL scheme of store/tier, read-only,
// and only bytes it verified, so that a tier of HTTP caches in front of
// it never keeps a byte that does not match its name.
//
//   - A manifest or a member table is served only if the SHA-256 of its
//     bytes is the digest in its name. A table (gigabytes at ten million
//     members) is streamed with its last piece held back until the digest
//     is known: on a mismatch the connection is cut short of its
//     Content-Length, which no cache keeps.
//   - An outboard is served only if it hashes to its member's digest
//     (b3.CheckOutboard).
//   - A block is read through one shared blocks.Reader, at the member's
//     pinned version and verified, once the snapshot of the URL's hint is
//     loaded from the store and names that digest at that ordinal.
//
// Anything else is refused: 400 for a URL that names no content, 404 for
// content the store does not hold, 405 for a method other than GET and
// HEAD, 503 when a request waited Config.QueueWait for one of
// Config.MaxRequests places, 502 and 504
// for store failures. Every refusal says `Cache-Control: no-store`.
package origin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/store/tier"
	"github.com/pinfs/pinfs/verify"
)

// Config configures a Handler. Store, Meta and Blocks are required.
type Config struct {
	// Store is where the blobs are read, and Meta the same through the
	// metadata cache (member tables load from its index).
	Store store.Store
	Meta  verify.Getter
	// Blocks reads member blocks, verified; its Objects is Store.
	Blocks *blocks.Reader
	// MaxRequests bounds the requests served at once (default 64): one
	// more waits, at most QueueWait (default 10 s), and is then answered
	// 503 with Retry-After. A node reads ahead with many blocks in flight,
	// and a 503 makes it back off: waiting a little is the cheaper answer.
	MaxRequests int
	QueueWait   time.Duration
	// Snapshots bounds the snapshots kept loaded (default 16; see
	// snapshots for the other bounds of block URLs).
	Snapshots int
	Log       *slog.Logger
	// Registerer receives the metrics (nil: a registry of the Handler's own).
	Registerer prometheus.Registerer
}

// Handler is the origin's http.Handler.
type Handler struct {
	cfg   Config
	slots chan struct{}
	reg   *prometheus.Registry

	snaps *snapshots

	requests *prometheus.CounterVec
	served   *prometheus.CounterVec
	inflight prometheus.Gauge
}

// New returns the Handler of cfg.
func New(cfg Config) *Handler {
	if cfg.MaxRequests <= 0 {
		cfg.MaxRequests = 64
	}
	if cfg.QueueWait <= 0 {
		cfg.QueueWait = 10 * time.Second
	}
	if cfg.Snapshots <= 0 {
		cfg.Snapshots = 16
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	h := &Handler{cfg: cfg, slots: make(chan struct{}, cfg.MaxRequests), snaps: newSnapshots(cfg)}
	h.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pinfs_origin_requests_total",
		Help: "Requests answered, by kind of URL and status code."}, []string{"kind", "code"})
	h.served = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pinfs_origin_bytes_total",
		Help: "Verified bytes answered, by kind of URL."}, []string{"kind"})
	h.inflight = prometheus.NewGauge(prometheus.GaugeOpts{Name: "pinfs_origin_requests_in_flight",
		Help: "Requests being answered."})
	reg := cfg.Registerer
	if reg == nil {
		h.reg = prometheus.NewRegistry()
		reg = h.reg
	}
	reg.MustRegister(h.requests, h.served, h.inflight)
	return h
}

// Kinds of URL, for the metrics.
const (
	kindManifest = "manifest"
	kindTable    = "table"
	kindOutboard = "outboard"
	kindBlock    = "block"
	kindOther    = "other"
)

// ServeHTTP answers one request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/")
	switch path {
	case tier.ReadyPath:
		if err := canLoad(); err != nil {
			h.refuse(w, kindOther, http.StatusServiceUnavailable, "not ready: "+err.Error())
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		io.WriteString(w, "ready\n")
		return
	case tier.MetricsPath:
		if h.reg == nil {
			h.refuse(w, kindOther, http.StatusNotFound, "metrics are served by the process's registry")
			return
		}
		promhttp.HandlerFor(h.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
		return
	}
	kind, digest, isMeta := tier.Meta(path)
	k := kindOther
	switch {
	case isMeta:
		k = map[string]string{"manifests/sha256": kindManifest, "members/sha256": kindTable, "bao/blake3": kindOutboard}[kind]
	case strings.HasPrefix(path, "blocks/"):
		k = kindBlock
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		h.refuse(w, k, http.StatusMethodNotAllowed, "the origin is read-only: GET and HEAD only")
		return
	}
	if !h.acquire(r.Context()) {
		w.Header().Set("Retry-After", "1")
		h.refuse(w, k, http.StatusServiceUnavailable, "busy: too many requests in flight")
		return
	}
	defer func() { <-h.slots }()
	h.inflight.Inc()
	defer h.inflight.Dec()
	switch {
	case k == kindManifest || k == kindOutboard:
		h.meta(w, r, k, path, kind, digest)
	case k == kindTable:
		h.table(w, r, path, digest)
	case k == kindBlock:
		h.block(w, r, path)
	default:
		h.refuse(w, k, http.StatusBadRequest, fmt.Sprintf("%q names no content this origin serves (see docs/cluster.md)", path))
	}
}

// acquire takes one of the MaxRequests places, waiting at most QueueWait
// (or until the request is canceled) for one.
func (h *Handler) acquire(ctx context.Context) bool {
	select {
	case h.slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(h.cfg.QueueWait)
	defer t.Stop()
	select {
	case h.slots <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// refuse answers code with a one-line reason that no cache keeps.
func (h *Handler) refuse(w http.ResponseWriter, kind string, code int, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, msg+"\n")
	h.requests.WithLabelValues(kind, fmt.Sprint(code)).Inc()
	if code >= 500 {
		h.cfg.Log.Warn("origin: refused", "kind", kind, "code", code, "err", msg)
	}
}

// failed answers a store or verification failure err of kind.
func (h *Handler) failed(w http.ResponseWriter, kind, what string, err error) {
	code := http.StatusBadGateway
	switch {
	case errors.Is(err, store.ErrNotFound) || errors.Is(err, iofs.ErrNotExist):
		code = http.StatusNotFound
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, blocks.ErrReadTimeout):
		code = http.StatusGatewayTimeout
	}
	if code == http.StatusBadGateway && !errors.Is(err, context.Canceled) {
		h.cfg.Log.Error("origin: "+what, "err", err)
	}
	h.refuse(w, kind, code, what+": "+oneLine(err))
}

// ok answers the verified bytes b of kind under etag.
func (h *Handler) ok(w http.ResponseWriter, r *http.Request, kind, etag string, b []byte) {
	w.Header().Set("Cache-Control", tier.CacheControl)
	w.Header().Set("ETag", etag)
	w.Header().Set("Content-Type", "application/octet-stream")
	cw := &countingWriter{ResponseWriter: w, code: http.StatusOK}
	http.ServeContent(cw, r, "", time.Time{}, bytes.NewReader(b))
	h.requests.WithLabelValues(kind, strconv.Itoa(cw.code)).Inc()
	h.served.WithLabelValues(kind).Add(float64(cw.n))
}

// countingWriter keeps the status and the body bytes of an answer that
// http.ServeContent writes (200, or 206, 304, 416 for a Range or a
// conditional request).
type countingWriter struct {
	http.ResponseWriter
	code int
	n    int64
}

func (c *countingWriter) WriteHeader(code int) {
	c.code = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

// meta answers the metadata blob under key, of kind and digest hexd, once
// it checks out against its name (tier.Check).
func (h *Handler) meta(w http.ResponseWriter, r *http.Request, k, key, kind, hexd string) {
	limit := int64(store.MaxManifest)
	if k == kindOutboard {
		limit = maxOutboard
	}
	b, err := store.GetAtMost(r.Context(), h.cfg.Store, key, limit)
	if err == nil {
		err = tier.Check(kind, hexd, b)
	}
	if err != nil {
		h.failed(w, k, key, err)
		return
	}
	h.ok(w, r, k, tier.MetaETag(kind, hexd), b)
}

// maxOutboard bounds an outboard the origin holds to check: that of a
// member of 1 TiB (about 1/1000 of the member's size).
const maxOutboard = 1 << 30

// oneLine returns err's message on one line.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }
