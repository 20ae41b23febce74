package origin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/store/metacache"
	"github.com/pinfs/pinfs/store/pool"
)

// Options are those of Run.
type Options struct {
	Store    store.Store
	Listen   string // HOST:PORT
	CacheDir string // metadata cache (and member table indexes) in CacheDir/meta
	// CacheMem is the block reader's memory tier (default 512 MiB).
	CacheMem    int64
	MaxRequests int
	ReadTimeout time.Duration // loading one block from the store
	// The connection deadlines (see connDeadlines for the defaults):
	// reading a request's header and body, each write of an answer (as
	// it progresses: Config.WriteTimeout), and an idle keep-alive
	// connection.
	RequestTimeout, WriteTimeout, IdleTimeout time.Duration
	Log                                       *slog.Logger
	// Ready, if set, is told the address once the origin listens.
	Ready func(addr string)
	Out   io.Writer // the "serving" line; nil: none

	// Pool and ReadaheadBudget are the block reader's (blocks.Config;
	// nil and 0: its defaults). The caller closes Pool after Run.
	Pool            *pool.Pool
	ReadaheadBudget int64
}

// Readahead is the origin's block reader's readahead window. The tier
// asks for a member's blocks one URL at a time, but a node reading a
// member through it asks for them in order, many at once: the reader
// sees a sequential stream and fetches it from the store in runs (8 MiB
// requests) instead of one GET per 1 MiB block, which is fewer requests
// to pay for and, at S3's latency, faster. Blocks of a run wait in the
// memory tier for their URL's request.
const Readahead = 32 << 20

// The default connection deadlines of Run: RequestTimeout for a client
// to send a request (header and body), WriteTimeout for each write of an
// answer to reach it, IdleTimeout for a keep-alive connection between
// requests.
const (
	defaultRequestTimeout = 10 * time.Second
	defaultWriteTimeout   = 30 * time.Second
	defaultIdleTimeout    = 60 * time.Second
)

// shutdownWait bounds how long Run waits for requests in flight once ctx ends.
const shutdownWait = 10 * time.Second

// Run serves o.Store at o.Listen until ctx ends, then stops accepting,
// lets the requests in flight finish (at most shutdownWait) and closes
// the block reader.
func Run(ctx context.Context, o Options) error {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.CacheMem <= 0 {
		o.CacheMem = 512 << 20
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = defaultRequestTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = defaultWriteTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = defaultIdleTimeout
	}
	meta := metacache.New(filepath.Join(o.CacheDir, "meta"), o.Store, metacache.WithLogger(o.Log))
	br, err := blocks.New(blocks.Config{Objects: o.Store, Outboards: meta, MemBytes: o.CacheMem,
		ReadTimeout: o.ReadTimeout, ReadaheadMax: Readahead, Reporter: logReporter{o.Log},
		Pool: o.Pool, ReadaheadBudget: o.ReadaheadBudget})
	if err != nil {
		return err
	}
	defer br.Close()
	h := New(Config{Store: o.Store, Meta: meta, Blocks: br, MaxRequests: o.MaxRequests, Log: o.Log,
		TableDir: filepath.Join(o.CacheDir, "tables"), WriteTimeout: o.WriteTimeout})
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	srv := &http.Server{
		Handler: h,
		// A request must come whole within RequestTimeout (net/http lifts
		// the read deadline once a request without a body is read, so a
		// long answer is not canceled by it); each
		// write of an answer has WriteTimeout (the Handler's, renewed as
		// it progresses); an idle connection is closed after IdleTimeout.
		ReadHeaderTimeout: o.RequestTimeout,
		ReadTimeout:       o.RequestTimeout,
		IdleTimeout:       o.IdleTimeout,
		// Requests run on a context of their own: the signal that ends
		// Run lets them finish (Shutdown) rather than cancel them.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ErrorLog:    slog.NewLogLogger(o.Log.Handler(), slog.LevelWarn),
	}
	o.Log.Info("serving", "store", o.Store.String(), "addr", ln.Addr().String())
	if o.Out != nil {
		fmt.Fprintf(o.Out, "serving %s at %s\n", o.Store, ln.Addr())
	}
	if o.Ready != nil {
		o.Ready(ln.Addr().String())
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel()
	err = srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		srv.Close()
		return fmt.Errorf("serve: requests still running after %v: cut", shutdownWait)
	}
	return err
}

// logReporter logs the block reader's events: the origin has no run
// record, and the request that met the event fails with it.
type logReporter struct{ log *slog.Logger }

func (l logReporter) Report(_ context.Context, ev blocks.Event) error {
	l.log.Error("origin: read path", "event", ev.Kind, "path", ev.Member.Path, "object", ev.Member.Object.String(),
		"off", ev.Off, "err", ev.Err)
	return nil
}
