// Package metrics exposes the Prometheus metrics of one pinfs mount, and
// the pprof handlers, over HTTP.
//
// Counters of the read path are not kept here: a collector reads
// Source.Stats (the block reader's atomic counters) at scrape time, so
// serving a block costs nothing extra. The one thing measured on the hot
// path is each read(2): ObserveRead records its latency, its size and its
// errno class without allocating.
//
// Every metric, the Go runtime and process ones included, carries the
// constant labels given to New (the mount's digest and run id), so that
// several mounts on one node can be told apart.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/store/metacache"
)

// Source is what the metrics read on every scrape (blocks.Reader
// satisfies it). Stats must be safe to call concurrently with reads.
type Source interface{ Stats() blocks.Stats }

var _ Source = (*blocks.Reader)(nil)

// Label names used by the metrics themselves; New rejects them as
// constant labels.
const (
	labelTier  = "tier"
	labelErrno = "errno"
)

// Metrics owns a registry with the pinfs metrics of one mount. Its methods
// are safe for concurrent use.
type Metrics struct {
	reg     *prometheus.Registry
	labeled prometheus.Registerer // reg, adding the constant labels
	latency prometheus.Histogram
	size    prometheus.Histogram
	errs    *prometheus.CounterVec
	// The errno classes fs.Errno gives, resolved once so that counting
	// them does not allocate.
	eio, eintr, eacces prometheus.Counter
	// log receives the HTTP server's errors (SetLogger); nil: the
	// standard library's log package.
	log *slog.Logger
}

// SetLogger makes the metrics server log its errors (a bad request, a
// failed accept) through l, so that they carry the mount's digest and run
// id like its other lines. Call it before Serve.
func (m *Metrics) SetLogger(l *slog.Logger) { m.log = l }

// New returns the Metrics of a mount whose read path is src. labels are
// constant labels put on every metric, as name/value pairs, e.g.
//
//	metrics.New(br, "digest", string(c.Digest), "run_id", runID)
//
// New panics if labels has an odd length, or if a name does not match
// [a-zA-Z_][a-zA-Z0-9_]*, starts with "__", is repeated, or is "tier",
// "errno" or "holder": these are programming errors.
func New(src Source, labels ...string) *Metrics {
	if len(labels)%2 != 0 {
		panic(fmt.Sprintf("metrics: New: odd number of label arguments (%d)", len(labels)))
	}
	constLabels := prometheus.Labels{}
	for i := 0; i < len(labels); i += 2 {
		name := labels[i]
		if !validLabelName(name) {
			panic(fmt.Sprintf("metrics: New: invalid label name %q", name))
		}
		if name == labelTier || name == labelErrno || name == labelHolder {
			panic(fmt.Sprintf("metrics: New: label %q is used by the metrics themselves", name))
		}
		if _, dup := constLabels[name]; dup {
			panic(fmt.Sprintf("metrics: New: label %q given twice", name))
		}
		constLabels[name] = labels[i+1]
	}

	m := &Metrics{
		reg: prometheus.NewRegistry(),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "pinfs_read_duration_seconds",
			Help: "Latency of read(2) requests served by the mount, failed ones included.",
			// 50 µs, 100 µs, 200 µs, ... 6.55 s, 13.1 s.
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 19),
		}),
		size: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "pinfs_read_size_bytes",
			Help: "Bytes returned by read(2) requests served by the mount.",
			// 4 KiB, 8 KiB, ... 1 MiB.
			Buckets: prometheus.ExponentialBuckets(4<<10, 2, 9),
		}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pinfs_read_errors_total",
			Help: "read(2) requests that failed, by the errno returned to the reader.",
		}, []string{labelErrno}),
	}
	m.eio = m.errs.WithLabelValues(unix.ErrnoName(syscall.EIO))
	m.eintr = m.errs.WithLabelValues(unix.ErrnoName(syscall.EINTR))
	m.eacces = m.errs.WithLabelValues(unix.ErrnoName(syscall.EACCES))

	r := prometheus.WrapRegistererWith(constLabels, m.reg)
	m.labeled = r
	r.MustRegister(
		newStatsCollector(src),
		m.latency, m.size, m.errs,
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.MetricsGC, collectors.MetricsScheduler)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// MetaCacheSource is the metadata cache the metrics read on every scrape
// (metacache.Cache satisfies it).
type MetaCacheSource interface{ Stats() metacache.Stats }

// WatchMetaCache exports src's counters: pinfs_meta_cache_write_errors_total.
// Call it once.
func (m *Metrics) WatchMetaCache(src MetaCacheSource) {
	m.labeled.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "pinfs_meta_cache_write_errors_total",
		Help: "Verified metadata (manifests, member tables, outboards) the local cache failed to keep; reads were served from the store.",
	}, func() float64 { return float64(src.Stats().WriteErrors) }))
}

// validLabelName reports whether name is a label name that every
// Prometheus version accepts, and not one reserved for internal use.
func validLabelName(name string) bool {
	if name == "" || strings.HasPrefix(name, "__") {
		return false
	}
	for i, c := range name {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// ObserveRead records one read(2) served: its latency d, the n bytes it
// returned, and, if err is not nil, its errno class in
// pinfs_read_errors_total. err may be the error of the read path (it is
// classed as fs.Errno would: EINTR for a canceled or timed out context,
// EACCES for store.ErrAccessDenied, EIO otherwise) or the syscall.Errno
// already given to the kernel; io.EOF and a zero Errno are not failures.
//
// ObserveRead does not allocate for the errno classes above.
func (m *Metrics) ObserveRead(d time.Duration, n int, err error) {
	m.latency.Observe(d.Seconds())
	m.size.Observe(float64(n))
	if err != nil {
		if c := m.errCounter(err); c != nil {
			c.Inc()
		}
	}
}

// errCounter returns the counter of err's errno class, or nil if err is
// not a failure.
func (m *Metrics) errCounter(err error) prometheus.Counter {
	if e, ok := err.(syscall.Errno); ok {
		switch e {
		case 0:
			return nil
		case syscall.EIO:
			return m.eio
		case syscall.EINTR:
			return m.eintr
		case syscall.EACCES:
			return m.eacces
		}
		name := unix.ErrnoName(e)
		if name == "" {
			name = fmt.Sprintf("errno%d", int(e))
		}
		return m.errs.WithLabelValues(name)
	}
	switch {
	case err == io.EOF:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return m.eintr
	case errors.Is(err, store.ErrAccessDenied):
		return m.eacces
	}
	return m.eio
}

// Handler returns the handler Serve serves: /metrics, and the
// net/http/pprof handlers under /debug/pprof/, which refuse a profile or
// trace longer than maxProfileSeconds.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
	}))
	handlePprof(mux)
	return mux
}

// shutdownGrace bounds how long Serve's server waits for requests in
// progress once ctx has ended.
const shutdownGrace = 5 * time.Second

// Timeouts of the metrics server. A scrape or a profile request is small
// and quick to send; a response may carry a profile of up to
// maxProfileSeconds, so writeTimeout exceeds it (pprof also moves the
// write deadline on by the profile's length).
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = maxProfileSeconds*time.Second + 30*time.Second
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
)

// server returns the HTTP server Serve runs, its requests under ctx.
func (m *Metrics) server(ctx context.Context) *http.Server {
	srv := &http.Server{
		Handler:           m.Handler(),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	if m.log != nil {
		srv.ErrorLog = slog.NewLogLogger(m.log.Handler(), slog.LevelWarn)
	}
	return srv
}

// Serve listens on addr (host:port; port 0 picks a free one) and serves
// Handler there in the background until ctx ends. It returns the bound
// address once the listener is open, or the error that kept it from
// opening. When ctx ends the listener is closed and requests in progress
// (a CPU profile, say) are canceled.
//
// The pprof handlers reveal the process's memory and command line: addr
// should be a loopback or otherwise private address.
func (m *Metrics) Serve(ctx context.Context, addr string) (net.Addr, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	srv := m.server(ctx)
	go srv.Serve(ln) //nolint:errcheck // ends with ErrServerClosed after Shutdown
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()
	return ln.Addr(), nil
}
