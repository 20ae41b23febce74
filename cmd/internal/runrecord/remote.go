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
type binding struct {
	RunID  string        `json:"run_id"`
	Digest verify.Digest `json:"digest"`
	Time   time.Time     `json:"time"`
	Host   string        `json:"host,omitempty"`
	PID    int           `json:"pid,omitempty"`
}

// remoteSink puts each event as its own object in a store, and spools it
// locally when the store cannot be reached. A background goroutine
// delivers the spool.
type remoteSink struct {
	blobs  store.Blobs
	url    string
	runID  string
	digest verify.Digest
	spool  *spool
	retry  time.Duration

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
// what the spool holds, and writes the event first(kind) returns.
func openRemote(ctx context.Context, o Options, runID string, first func(kind string) (*Event, []byte, error)) (_ *remoteSink, err error) {
	sp, err := openSpool(o.SpoolDir, runID)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			sp.close()
		}
	}()
	local, err := sp.binding()
	if err != nil {
		return nil, err
	}
	if local != nil && local.URL != o.URL && sp.pending.Load() > 0 {
		return nil, fmt.Errorf("runrecord: %s holds %d undelivered events of run %s for %s; open the run with that URL to deliver them",
			sp.path, sp.pending.Load(), runID, local.URL)
	}
	blobs, err := o.Open(ctx, o.URL)
	if err != nil {
		return nil, fmt.Errorf("runrecord: %w", err)
	}
	s := &remoteSink{
		blobs: blobs, url: o.URL, runID: runID, digest: o.Digest, spool: sp, retry: o.Retry,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	if s.retry <= 0 {
		s.retry = time.Second
	}
	kind, err := s.bind(ctx)
	switch {
	case errors.Is(err, ErrDigestChanged), errors.Is(err, store.ErrNotExclusive):
		return nil, err
	case err == nil:
		s.verified.Store(true)
		lb := localBinding{URL: o.URL, RunID: runID, Digest: o.Digest}
		if local == nil || *local != lb {
			if err := sp.setBinding(lb); err != nil {
				return nil, err
			}
		}
	case local != nil && local.URL == o.URL && local.RunID == runID:
		// Offline, but this host bound the run against the store before.
		if local.Digest != o.Digest {
			return nil, digestChanged(runID, local.Digest, o.Digest, sp.bind)
		}
		kind = Resume
	default:
		return nil, fmt.Errorf("runrecord: cannot check which digest run %s is bound to, so it cannot start: %w", runID, err)
	}
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.flush(ctx) // what is left stays spooled, behind which the first event goes
	e, line, err := first(kind)
	if err == nil {
		err = s.emit(ctx, e, line)
	}
	if err != nil {
		s.cancel()
		return nil, err
	}
	go s.deliver()
	return s, nil
}

// bind checks the store's binding of the run against s.digest, creating
// it if there is none, and returns RunStart or Resume. The error wraps
// ErrDigestChanged if the run is bound to another digest, and
// store.ErrNotExclusive if the binding cannot be created exclusively (the
// run must not be bound then: two first mounts could both claim
// run_start); any other error means the binding could not be checked.
func (s *remoteSink) bind(ctx context.Context) (string, error) {
	key := bindingKey(s.runID)
	data, err := s.blobs.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		c, ok := s.blobs.(store.Creator)
		if !ok {
			return "", fmt.Errorf("runrecord: %s: %w: refusing to bind run %s", s.url, store.ErrNotExclusive, s.runID)
		}
		host, _ := os.Hostname()
		mine, merr := json.Marshal(binding{RunID: s.runID, Digest: s.digest, Time: time.Now().UTC(), Host: host, PID: os.Getpid()})
		if merr != nil {
			return "", merr
		}
		mine = append(mine, '\n')
		cerr := c.Create(ctx, key, mine)
		switch {
		case cerr == nil:
			return RunStart, nil
		case errors.Is(cerr, store.ErrNotExclusive):
			return "", fmt.Errorf("runrecord: %w: refusing to bind run %s", cerr, s.runID)
		}
		// Another mount created it first, or the create failed: look again.
		if data, err = s.blobs.Get(ctx, key); err != nil {
			return "", fmt.Errorf("create %s: %w", key, cerr)
		}
		if bytes.Equal(data, mine) {
			return RunStart, nil // our Put landed; only its answer was lost
		}
	}
	if err != nil {
		return "", err
	}
	var b binding
	if err := json.Unmarshal(data, &b); err != nil || b.RunID != s.runID {
		return "", fmt.Errorf("%s in %s is not a binding of run %s", key, s.url, s.runID)
	}
	if b.Digest != s.digest {
		return "", digestChanged(s.runID, b.Digest, s.digest, s.url+" "+key)
	}
	return Resume, nil
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
		_, err := s.bind(ctx)
		if errors.Is(err, ErrDigestChanged) || errors.Is(err, store.ErrNotExclusive) {
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
