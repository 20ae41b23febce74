// Package origin is the HTTP origin of a pinfs cluster (pinfs serve): it
// serves a store's content by the URL scheme of store/tier, read-only,
// and only bytes it verified, so that a tier of HTTP caches in front of
// it never keeps a byte that does not match its name.
//
//   - A manifest is served only if it checks against the digest in its
//     name (tier.Check); it is read whole to be checked, at most
//     store.MaxManifest bytes, within Config.ManifestBudget for all the
//     manifests being checked at once.
//   - A member table is served only if the SHA-256 of its bytes is the
//     digest in its name. A table (gigabytes at ten million members) is
//     streamed with its last piece held back until the digest is known:
//     on a mismatch the connection is cut short of its Content-Length,
//     which no cache keeps. It streams from the origin's verified copy
//     (Config.TableDir) once it has one; a bypass request reads the store
//     again at most once a Config.TableRefresh.
//   - An outboard is checked as it streams (b3.OutboardStream): its header
//     and root node before the answer begins, each further node before
//     it is sent, at most outboardBuf bytes held.
//   - A block is read through one shared blocks.Reader, at the member's
//     pinned version and verified, once the snapshot of the URL's hint is
//     loaded from the store and names that digest at that ordinal.
//
// Anything else is refused: 400 for a URL that names no content, 404 for
// content the store does not hold, 405 for a method other than GET and
// HEAD, 503 when a request waited Config.QueueWait for one of
// Config.MaxRequests places (or for the manifest budget), 502 and 504
// for store failures. Every refusal says `Cache-Control: no-store`, and
// names what was asked with a generic reason: the store's error, which
// may name its paths, bucket, keys and versions, goes to the log only.
//
// Every write of an answer has Config.WriteTimeout to reach the client,
// renewed as the answer progresses; Run adds the deadlines of reading a
// request and of an idle connection.
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
	"github.com/pinfs/pinfs/verify/b3"
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
	// TableDir is where the origin keeps verified copies of the member
	// tables it serves, and serves them from ("": nowhere; every table is
	// read from the store). TableRefresh (default 1 min) is the least
	// time between two reads of one table from the store: a bypass
	// request within it gets the copy.
	TableDir     string
	TableRefresh time.Duration
	// ManifestBudget bounds the bytes of manifests held at once to be
	// checked (default 256 MiB; a manifest is read whole, at most
	// store.MaxManifest, 64 MiB): a request that finds it spent waits,
	// at most QueueWait, then gets 503.
	ManifestBudget int64
	// WriteTimeout bounds each write of an answer to the client, at most
	// writePiece bytes (default 30 s): a client that stops reading is cut
	// off after it, and its place freed, however long the answer.
	WriteTimeout time.Duration
	Log          *slog.Logger
	// Registerer receives the metrics (nil: a registry of the Handler's own).
	Registerer prometheus.Registerer
}

// Handler is the origin's http.Handler.
type Handler struct {
	cfg   Config
	slots chan struct{}
	reg   *prometheus.Registry

	tables    *tableCopies
	manifests *budget
	snaps     *snapshots

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
	if cfg.TableRefresh <= 0 {
		cfg.TableRefresh = time.Minute
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.ManifestBudget <= 0 {
		cfg.ManifestBudget = 256 << 20
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	h := &Handler{cfg: cfg, slots: make(chan struct{}, cfg.MaxRequests), snaps: newSnapshots(cfg),
		tables: &tableCopies{dir: cfg.TableDir, refresh: cfg.TableRefresh,
			filling: map[string]chan struct{}{}, read: map[string]time.Time{}},
		manifests: newBudget(cfg.ManifestBudget)}
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

// ServeHTTP answers one request. Each write of the answer has
// Config.WriteTimeout to reach the client (deadlineWriter).
func (h *Handler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w := &deadlineWriter{ResponseWriter: rw, rc: http.NewResponseController(rw), d: h.cfg.WriteTimeout}
	defer w.extend() // for what the server flushes after the handler
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

// refuse answers code with a one-line reason that no cache keeps; a
// reason of 500 or more is logged. The reason is the origin's own words
// about the request, never a store's error (failed is for those).
func (h *Handler) refuse(w http.ResponseWriter, kind string, code int, msg string) {
	if code >= 500 {
		h.cfg.Log.Warn("origin: refused", "kind", kind, "code", code, "err", msg)
	}
	h.answer(w, kind, code, msg)
}

// answer writes the refusal code with msg, never cached, and counts it.
func (h *Handler) answer(w http.ResponseWriter, kind string, code int, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Del("Content-Length")
	w.Header().Del("ETag")
	w.WriteHeader(code)
	io.WriteString(w, msg+"\n")
	h.requests.WithLabelValues(kind, fmt.Sprint(code)).Inc()
}

// failed answers a store or verification failure err of what (the
// content the client asked for, in its own terms). The answer says only
// what and a generic reason: err, which may name the store's paths,
// bucket, keys and versions, goes to the log.
func (h *Handler) failed(w http.ResponseWriter, kind, what string, err error) {
	code, reason := http.StatusBadGateway, "the store failed to give it (see the origin's log)"
	level := slog.LevelError
	switch {
	case errors.Is(err, store.ErrNotFound) || errors.Is(err, iofs.ErrNotExist):
		code, reason, level = http.StatusNotFound, "not in the store", slog.LevelDebug
	case errors.Is(err, context.Canceled):
		reason, level = "canceled", slog.LevelDebug
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, blocks.ErrReadTimeout):
		code, reason, level = http.StatusGatewayTimeout, "the store did not answer in time", slog.LevelWarn
	case errors.Is(err, b3.ErrMismatch) || errors.Is(err, verify.ErrInvalid):
		reason = "the store's copy does not match its name"
	case errors.Is(err, store.ErrTooLarge):
		reason = "the store's copy is larger than the origin serves"
	case errors.Is(err, errTooSoon):
		code, reason, level = http.StatusServiceUnavailable, "read from the store moments ago, without a good copy; retry later", slog.LevelWarn
		w.Header().Set("Retry-After", strconv.Itoa(int(h.cfg.TableRefresh.Seconds())))
	}
	h.cfg.Log.Log(context.Background(), level, "origin: refused", "kind", kind, "what", what, "code", code, "err", err)
	h.answer(w, kind, code, what+": "+reason)
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

// writePiece is the most deadlineWriter writes under one deadline.
const writePiece = 64 << 10

// deadlineWriter gives each write of an answer, writePiece bytes at most,
// d to reach the client: http.Server's WriteTimeout is one deadline for a
// whole answer, which a large member table would not meet; this one only
// needs the client to keep reading.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), writePiece)
		w.extend()
		m, err := w.ResponseWriter.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// extend sets the connection's write deadline d from now.
func (w *deadlineWriter) extend() { w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

// Unwrap lets http.ResponseController reach the server's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

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

// meta answers the metadata blob under key, of kind and digest hexd,
// once it checks out against its name: a manifest whole (manifest), an
// outboard as it streams (outboard).
func (h *Handler) meta(w http.ResponseWriter, r *http.Request, k, key, kind, hexd string) {
	if k == kindOutboard {
		h.outboard(w, r, key, hexd)
		return
	}
	h.manifest(w, r, key, kind, hexd)
}
