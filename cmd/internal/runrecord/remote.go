package runrecord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

const (
	putTimeout   = 10 * time.Second // one Put of an event
	retryMax     = time.Minute      // the longest delay between deliveries
	closeTimeout = time.Minute      // Close's last delivery
)

// binding is the object runs/<run-id>/run.json. It is made with an
// exclusive create (store.Creator), so that of two first mounts racing,
// exactly one claims run_start and the other reads the winner's binding.
// It carries the time, host and pid of the mount that created it, so that
// a create whose answer was lost can tell its own binding from another's.
// Admit makes it with a Permit; then the first mount claims run_start by
// creating runs/<run-id>/start.json (a binding without a permit) the same
// exclusive way.
type binding struct {
	RunID  string        `json:"run_id"`
	Digest verify.Digest `json:"digest"`
	Time   time.Time     `json:"time"`
	Host   string        `json:"host,omitempty"`
	PID    int           `json:"pid,omitempty"`
	Permit *Permit       `json:"permit,omitempty"`
}

// parseBinding decodes the binding object data of run runID (at key in
// the store at url).
func parseBinding(data []byte, runID, key, url string) (*binding, error) {
	var b binding
	if err := json.Unmarshal(data, &b); err != nil || b.RunID != runID {
		return nil, fmt.Errorf("runrecord: %s in %s is not a binding of run %s", key, url, runID)
	}
	return &b, nil
}

// remoteSink puts each event as its own object in a store, and spools it
// locally when the store cannot be reached. A background goroutine
// delivers the spool.
type remoteSink struct {
	blobs   store.Blobs
	url     string
	runID   string
	digest  verify.Digest
	require bool    // Options.RequirePermit
	want    *Permit // Options.Permit
	spool   *spool
	retry   time.Duration

	// verified is set once the store's binding of the run has been
	// checked in this process; until then every event is spooled.
	verified atomic.Bool

	flushMu sync.Mutex // one delivery at a time

	mu      sync.Mutex
	lastErr error // the latest failure to reach the store
	fatal   error // the store's binding turned out to be another digest

	kick   chan struct{} // an event was spooled
	ctx    context.Context
	cancel context.CancelFunc // stops the delivery in progress
	stop   chan struct{}      // stops the delivery goroutine
	done   chan struct{}      // closed when it has returned
}

// openRemote opens the store at o.URL, binds or resumes runID, delivers
// what the spool holds, and writes the event first(kind) returns. It
// returns the run's permit, nil if it has none.
func openRemote(ctx context.Context, o Options, runID string, first func(kind string) (*Event, []byte, error)) (_ *remoteSink, _ *Permit, err error) {
	sp, err := openSpool(o.SpoolDir, runID)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			sp.close()
		}
	}()
	local, err := sp.binding()
	if err != nil {
		return nil, nil, err
	}
	if local != nil && local.URL != o.URL && sp.pending.Load() > 0 {
		return nil, nil, fmt.Errorf("runrecord: %s holds %d undelivered events of run %s for %s; open the run with that URL to deliver them",
			sp.path, sp.pending.Load(), runID, local.URL)
	}
	blobs, err := o.Open(ctx, o.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("runrecord: %w", err)
	}
	s := &remoteSink{
		blobs: blobs, url: o.URL, runID: runID, digest: o.Digest, require: o.RequirePermit, want: o.Permit, spool: sp, retry: o.Retry,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	if s.retry <= 0 {
		s.retry = time.Second
	}
	kind, permit, err := s.bind(ctx)
	switch {
	case errors.Is(err, ErrDigestChanged), errors.Is(err, store.ErrNotExclusive), errors.Is(err, ErrNotPermitted):
		return nil, nil, err
	case err == nil:
		s.verified.Store(true)
		lb := localBinding{URL: o.URL, RunID: runID, Digest: o.Digest, Permit: permit}
		if !local.same(&lb) {
			if err := sp.setBinding(lb); err != nil {
				return nil, nil, err
			}
		}
	case local != nil && local.URL == o.URL && local.RunID == runID:
		// Offline, but this host bound the run against the store before.
		if o.RequirePermit {
			if err := checkPermit(runID, local.Permit, o.Digest, o.Permit, o.URL+" (this host's binding in "+sp.bind+")"); err != nil {
				return nil, nil, err
			}
		}
		if local.Digest != o.Digest {
			return nil, nil, digestChanged(runID, local.Digest, o.Digest, sp.bind)
		}
		kind, permit = Resume, local.Permit
	default:
		return nil, nil, fmt.Errorf("runrecord: cannot check which digest run %s is bound to, so it cannot start: %w", runID, err)
	}
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.flush(ctx) // what is left stays spooled, behind which the first event goes
	e, line, err := first(kind)
	if err == nil {
		err = s.emit(ctx, e, line)
	}
	if err != nil {
		s.cancel()
		return nil, nil, err
	}
	go s.deliver()
	return s, permit, nil
}

// bind checks the store's binding of the run against s.digest, creating
// it if there is none, and returns RunStart or Resume and the run's
// permit. A run that Admit bound is started by the mount that creates its
// start object. The error wraps ErrDigestChanged if the run is bound to
// another digest; ErrNotPermitted if s.require and the run holds no
// permit for s.digest (no binding is created then); and
// store.ErrNotExclusive if an object cannot be created exclusively (the
// run must not be bound then: two first mounts could both claim
// run_start). Any other error means the binding could not be checked.
func (s *remoteSink) bind(ctx context.Context) (string, *Permit, error) {
	key := bindingKey(s.runID)
	data, err := store.GetAtMost(ctx, s.blobs, key, store.MaxRecord)
	if errors.Is(err, store.ErrNotFound) {
		if s.require {
			return "", nil, checkPermit(s.runID, nil, s.digest, s.want, s.url)
		}
		var mine bool
		if mine, data, err = s.claim(ctx, key); mine {
			return RunStart, nil, nil
		}
	}
	if err != nil {
		return "", nil, err
	}
	b, err := parseBinding(data, s.runID, key, s.url)
	if err != nil {
		return "", nil, err
	}
	if s.require {
		if err := checkPermit(s.runID, b.Permit, s.digest, s.want, s.url); err != nil {
			return "", nil, err
		}
	}
	if b.Digest != s.digest {
		return "", nil, digestChanged(s.runID, b.Digest, s.digest, s.url+" "+key)
	}
	if b.Permit == nil {
		return Resume, nil, nil
	}
	started, _, err := s.claim(ctx, startKey(s.runID))
	if err != nil {
		return "", nil, err
	}
	if started {
		return RunStart, b.Permit, nil
	}
	return Resume, b.Permit, nil
}

// claim creates key exclusively (store.Creator) with a binding of this
// mount. It reports whether this mount made it, also when only the answer
// of its create was lost; if not, data is what key holds. The error wraps
// store.ErrNotExclusive when the store cannot create exclusively.
func (s *remoteSink) claim(ctx context.Context, key string) (mine bool, data []byte, err error) {
	c, ok := s.blobs.(store.Creator)
	if !ok {
		return false, nil, fmt.Errorf("runrecord: %s: %w: refusing to bind run %s", s.url, store.ErrNotExclusive, s.runID)
	}
	host, _ := os.Hostname()
	b, err := json.Marshal(binding{RunID: s.runID, Digest: s.digest, Time: time.Now().UTC(), Host: host, PID: os.Getpid()})
	if err != nil {
		return false, nil, err
	}
	b = append(b, '\n')
	cerr := c.Create(ctx, key, b)
	switch {
	case cerr == nil:
		return true, nil, nil
	case errors.Is(cerr, store.ErrNotExclusive):
		return false, nil, fmt.Errorf("runrecord: %w: refusing to bind run %s", cerr, s.runID)
	}
	// Another mount created it first, or the create failed: look again.
	if data, err = store.GetAtMost(ctx, s.blobs, key, store.MaxRecord); err != nil {
		return false, nil, fmt.Errorf("create %s: %w", key, cerr)
	}
	return bytes.Equal(data, b), data, nil
}

// emit puts the event, or spools it if the Put fails, if older events are
// spooled still, or if the binding has not been checked yet.
func (s *remoteSink) emit(ctx context.Context, e *Event, line []byte) error {
	var perr error
	if s.verified.Load() && s.spool.pending.Load() == 0 {
		pctx, cancel := context.WithTimeout(ctx, putTimeout)
		perr = s.blobs.Put(pctx, eventKey(e, line), line)
		cancel()
		if perr == nil {
			return nil
		}
		s.setErr(perr)
	}
	if err := s.spool.append(line); err != nil {
		if perr != nil {
			return fmt.Errorf("runrecord: run %s: %s event: put: %w; and %w", s.runID, e.Event, perr, err)
		}
		return err
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return nil
}

// deliver is the background goroutine: it waits for spooled events, then
// delivers them with a delay that doubles after each failure.
func (s *remoteSink) deliver() {
	defer close(s.done)
	delay := s.retry
	for {
		if s.spool.pending.Load() == 0 {
			select {
			case <-s.stop:
				return
			case <-s.kick:
			}
			delay = s.retry
		}
		t := time.NewTimer(delay)
		select {
		case <-s.stop:
			t.Stop()
			return
		case <-t.C:
		}
		if err := s.flush(s.ctx); err != nil || s.spool.pending.Load() > 0 {
			delay = min(2*delay, retryMax)
		}
		if s.fatalErr() != nil {
			return
		}
	}
}

// flush checks the binding if that is still to be done, then puts the
// spooled events in order and removes those delivered from the spool. It
// stops at the first failure.
func (s *remoteSink) flush(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if err := s.fatalErr(); err != nil {
		return err
	}
	if !s.verified.Load() {
		_, _, err := s.bind(ctx)
		if errors.Is(err, ErrDigestChanged) || errors.Is(err, store.ErrNotExclusive) || errors.Is(err, ErrNotPermitted) {
			s.mu.Lock()
			s.fatal = fmt.Errorf("runrecord: run %s resumed offline, but the store's binding cannot be confirmed: %w", s.runID, err)
			s.mu.Unlock()
			return s.fatal
		}
		if err != nil {
			s.setErr(err)
			return err
		}
		s.verified.Store(true)
	}
	es, err := s.spool.entries()
	if err != nil {
		return err
	}
	delivered := make(map[string]bool, len(es))
	var perr error
	for _, e := range es {
		pctx, cancel := context.WithTimeout(ctx, putTimeout)
		perr = s.blobs.Put(pctx, e.key, e.line)
		cancel()
		if perr != nil {
			s.setErr(perr)
			break
		}
		delivered[e.key] = true
	}
	if len(delivered) > 0 {
		if _, err := s.spool.remove(delivered); err != nil {
			return err
		}
	}
	return perr
}

// close stops the delivery goroutine and makes one last attempt.
func (s *remoteSink) close(ctx context.Context) error {
	s.cancel()
	close(s.stop)
	<-s.done
	ctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	ferr := s.flush(ctx)
	n := s.spool.pending.Load()
	cerr := s.spool.close()
	if err := s.fatalErr(); err != nil {
		return err
	}
	if n > 0 {
		if ferr == nil {
			ferr = s.lastError()
		}
		return fmt.Errorf("runrecord: run %s: %d events stay in %s (last error: %v); the next Open of the run delivers them: %w",
			s.runID, n, s.spool.path, ferr, ErrSpooled)
	}
	return cerr
}

func (s *remoteSink) setErr(err error) {
	s.mu.Lock()
	s.lastErr = err
	s.mu.Unlock()
}

func (s *remoteSink) lastError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

func (s *remoteSink) fatalErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fatal
}
