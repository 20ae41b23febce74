package runrecord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/buildinfo"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/dial"
	"github.com/pinfs/pinfs/verify"
)

// ErrDigestChanged is returned by Open for a run id that is bound to
// another digest. The mount must refuse to start: resuming keeps the
// original digest, and changed data is a new run.
var ErrDigestChanged = errors.New("the run is bound to another snapshot digest: the data changed, so start a new run (a new --run-id)")

// ErrSpooled is returned by Close when events are left in the local
// spool because the store could not be reached. They are not lost: the
// next Open of the same run with the same spool directory delivers them.
var ErrSpooled = errors.New("undelivered events stay in the local spool")

// Options says where a run record is kept and which run it is.
type Options struct {
	// URL is a local JSON Lines file, or s3://bucket/prefix.
	URL string
	// RunID names the run; "" generates a time-sortable id such as
	// 20261130T123456Z-1a2b3c4d (see Record.RunID).
	RunID string
	// Digest is the manifest digest being mounted.
	Digest verify.Digest
	// SpoolDir keeps events that could not be delivered to a store yet.
	// Required for s3:// URLs, unused for a local file.
	SpoolDir string
	// Open reaches a store URL. nil means store/dial.Open.
	Open func(ctx context.Context, url string) (store.Blobs, error)
	// Retry is the first delay before spooled events are sent again; it
	// doubles after each failed attempt up to a minute. 0 means a second.
	Retry time.Duration
	// RequirePermit makes Open refuse, writing nothing, unless the run
	// holds a permit (see Admit) for exactly Digest. It needs a RunID.
	RequirePermit bool
	// Permit, with RequirePermit, is the permit the run must hold, field
	// for field: the one the caller checked against the store before it
	// opened the record (a binding changed since is refused).
	Permit *Permit
	// Store is the mount's --store URL, written on run_start and resume
	// so that a reader of the record knows where the run's data is.
	Store string
	// FlushInterval is how often the mount writes its consumed delta,
	// written on run_start and resume (a reader judges a silent mount by
	// it, see Run.State). 0 writes none.
	FlushInterval time.Duration
}

// Record is the open run record of one mount. Its methods may be called
// concurrently.
type Record struct {
	runID   string
	digest  verify.Digest
	resumed bool
	permit  *Permit
	host    string // stamped on every event
	pid     int
	sink    sink
	seq     atomic.Int64

	mu sync.RWMutex // held for reading by Emit, for writing by Close
	// order is held by Emit from stamping an event to writing it, so that
	// events reach the file, the store or the spool in the order of their
	// time and seq (a periodic consumed delta and a failing read's event
	// can be emitted at the same moment).
	order  sync.Mutex
	closed bool
}

// sink is where a record's events go once they are stamped and encoded.
// emit returns when the event is durable.
type sink interface {
	emit(ctx context.Context, e *Event, line []byte) error
	close(ctx context.Context) error
}

var runIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// checkRunID accepts ids that are safe as a file name and a key component.
func checkRunID(id string) error {
	if !runIDRE.MatchString(id) {
		return fmt.Errorf("runrecord: run id %q: want 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", id)
	}
	return nil
}

// NewRunID returns a new run id: <UTC time>-<8 random hex digits>.
func NewRunID() string {
	var b [4]byte
	rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// Open opens the run record at o.URL and binds the run to o.Digest
// (appending run_start) or resumes it (appending resume). The first Open
// of a run that Admit bound appends run_start. A run bound to another
// digest is refused with an error wrapping ErrDigestChanged, and with
// o.RequirePermit a run that holds no permit for o.Digest (or, with
// o.Permit, not exactly that one) is refused with an error wrapping
// ErrNotPermitted; nothing is written then. For a
// store, Open first delivers any events an earlier process left in the
// spool, and fails if it cannot check the binding, unless this host bound
// the run before (see the package documentation).
func Open(ctx context.Context, o Options) (*Record, error) {
	if _, err := verify.ParseDigest(string(o.Digest)); err != nil {
		return nil, fmt.Errorf("runrecord: %w", err)
	}
	host, _ := os.Hostname()
	r := &Record{runID: o.RunID, digest: o.Digest, host: host, pid: os.Getpid()}
	if r.runID == "" {
		if o.RequirePermit {
			return nil, errors.New("runrecord: a permit is held by a named run: RequirePermit needs a run id")
		}
		r.runID = NewRunID()
	}
	if err := checkRunID(r.runID); err != nil {
		return nil, err
	}
	first := func(kind string) (*Event, []byte, error) {
		r.resumed = kind == Resume
		build := buildinfo.Get()
		e := &Event{Event: kind, Store: o.Store, Proc: selfIdentity(), Pinfs: &build}
		if o.FlushInterval > 0 {
			e.FlushInterval = o.FlushInterval.String()
		}
		r.stamp(e)
		line, err := e.line()
		return e, line, err
	}
	remote, err := o.target()
	if err != nil {
		return nil, err
	}
	if remote {
		r.sink, r.permit, err = openRemote(ctx, o, r.runID, first)
	} else {
		r.sink, r.permit, err = openLocal(o, r.runID, func(kind string) ([]byte, error) {
			_, line, err := first(kind)
			return line, err
		})
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// target checks o.URL and reports whether it names a store (s3://), which
// o.Open reaches (set to store/dial.Open when nil), or a local file.
func (o *Options) target() (remote bool, err error) {
	switch {
	case o.URL == "":
		return false, errors.New("runrecord: no run record URL")
	case strings.HasPrefix(o.URL, "s3://"):
		if o.Open == nil {
			o.Open = func(ctx context.Context, url string) (store.Blobs, error) { return dial.Open(ctx, url) }
		}
		return true, nil
	case strings.Contains(o.URL, "://"):
		return false, fmt.Errorf("runrecord: %q: want a local file or s3://bucket/prefix", o.URL)
	}
	return false, nil
}

// RunID returns the run's id, which Open may have generated.
func (r *Record) RunID() string { return r.runID }

// Resumed reports whether Open resumed an existing run.
func (r *Record) Resumed() bool { return r.resumed }

// stamp fills e's time (if unset), run id, digest, host, pid and
// sequence number.
func (r *Record) stamp(e *Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.Time = e.Time.UTC().Round(0)
	e.RunID = r.runID
	e.Digest = r.digest
	e.Host, e.PID = r.host, r.pid
	e.Seq = r.seq.Add(1)
}

// Emit stamps e (see Event) and appends it to the record. It returns only
// when e is durable: synced to the local file, stored by a completed Put,
// or, when the store cannot be reached, synced to the spool. ctx bounds
// only the attempt to reach the store; a canceled ctx sends e to the
// spool rather than dropping it. The kinds run_start and resume are
// Open's and are refused here.
func (r *Record) Emit(ctx context.Context, e Event) error {
	if !emittable(e.Event) {
		return fmt.Errorf("runrecord: cannot emit an event of kind %q", e.Event)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return fmt.Errorf("runrecord: run %s: emit %s after Close", r.runID, e.Event)
	}
	r.order.Lock()
	defer r.order.Unlock()
	r.stamp(&e)
	line, err := e.line()
	if err != nil {
		return err
	}
	return r.sink.emit(ctx, &e, line)
}

// Close waits for Emit calls in progress, then stops the record. For a
// store it makes a last delivery attempt, bounded by ctx and by a minute;
// events it could not deliver stay in the spool, and Close reports them
// with an error wrapping ErrSpooled. Later calls return nil.
func (r *Record) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	return r.sink.close(ctx)
}

// digestChanged is the error for run id, bound to digest bound (at
// where), opened with digest now.
func digestChanged(runID string, bound, now verify.Digest, where string) error {
	return fmt.Errorf("runrecord: run %s was started on %s (%s), this mount is %s: %w", runID, bound, where, now, ErrDigestChanged)
}
