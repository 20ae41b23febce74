package runrecord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

// PermitEvent is the kind of the event that Admit writes as the first line
// of a run in a local record file. It is not emitted by a mount.
const PermitEvent = "permit"

// ErrNotPermitted is wrapped by Open with RequirePermit when the run holds
// no permit, or a permit for another digest: the mount must not start.
var ErrNotPermitted = errors.New("admit the run for this digest first (pinfs admit), or mount without --require-permit")

// Permit is what admission decided for one run: the snapshot it may read
// and why. Admit writes it as the run's binding, so the run is bound to
// Digest from then on: a later alias generation never changes it.
type Permit struct {
	RunID              string        `json:"run_id"`
	Digest             verify.Digest `json:"digest"`
	Purpose            string        `json:"purpose"`
	Gate               string        `json:"gate,omitempty"` // "" when admitted by digest
	Generation         int64         `json:"generation,omitempty"`
	TombstoneWatermark int64         `json:"tombstone_watermark"`
	BenchmarkFence     int64         `json:"benchmark_fence"`
	Policy             verify.Digest `json:"policy,omitempty"`
	Approvals          []string      `json:"approvals,omitempty"` // key ids that approved
	Time               time.Time     `json:"time"`
}

// Permit returns the permit in the run's binding, or nil if the run was
// started without one. It is known on resume too, also when a store-backed
// run resumes offline from this host's local binding.
func (r *Record) Permit() *Permit { return r.permit }

// Admit binds run o.RunID to p.Digest by writing p as the run's binding:
// in a local record file a "permit" event as the run's first line (under
// the file's lock); in a store the object runs/<run-id>/run.json, created
// exclusively, with the permit in its "permit" field. It writes nothing
// else, and needs no spool: if the store cannot be reached it fails.
//
// The run id is o.RunID, else p.RunID, else a generated one (as Open
// does); p.Digest must equal o.Digest when that is set, and p.Time is
// set to now when zero. The permit written is returned with created true.
//
// If the run already holds a permit, Admit returns that one with created
// false and writes nothing, whatever its digest: the caller decides. If
// the run is bound without a permit (a mount started it unadmitted),
// Admit fails. Of concurrent Admits of one run, exactly one creates.
func Admit(ctx context.Context, o Options, p Permit) (held Permit, created bool, err error) {
	switch {
	case o.RunID == "":
		o.RunID = p.RunID
	case p.RunID != "" && p.RunID != o.RunID:
		return Permit{}, false, fmt.Errorf("runrecord: admit: the permit names run %s, the options run %s", p.RunID, o.RunID)
	}
	if o.RunID == "" {
		o.RunID = NewRunID()
	}
	if err := checkRunID(o.RunID); err != nil {
		return Permit{}, false, err
	}
	p.RunID = o.RunID
	if _, err := verify.ParseDigest(string(p.Digest)); err != nil {
		return Permit{}, false, fmt.Errorf("runrecord: admit run %s: %w", p.RunID, err)
	}
	if o.Digest != "" && o.Digest != p.Digest {
		return Permit{}, false, fmt.Errorf("runrecord: admit run %s: the permit is for %s, the options name %s", p.RunID, p.Digest, o.Digest)
	}
	if p.Time.IsZero() {
		p.Time = time.Now()
	}
	p.Time = p.Time.UTC().Round(0)
	remote, err := o.target()
	if err != nil {
		return Permit{}, false, err
	}
	if remote {
		return admitRemote(ctx, o, p)
	}
	return admitLocal(o.URL, p)
}

// admitLocal appends p as a permit event under the record file's lock,
// unless the run already has events.
func admitLocal(path string, p Permit) (Permit, bool, error) {
	f, err := openRecordFile(path)
	if err != nil {
		return Permit{}, false, err
	}
	defer f.Close()
	lf := lockedFile{f: f}
	if err := lf.lock(); err != nil {
		return Permit{}, false, err
	}
	defer lf.unlock()
	b, err := readBinding(f, p.RunID)
	if err != nil {
		return Permit{}, false, fmt.Errorf("runrecord: read %s: %w", path, err)
	}
	if b.found {
		return heldPermit(p.RunID, b.Permit, path)
	}
	host, _ := os.Hostname()
	e := &Event{Time: p.Time, RunID: p.RunID, Digest: p.Digest, Event: PermitEvent, Seq: 1, Host: host, PID: os.Getpid(), Permit: &p}
	line, err := e.line()
	if err != nil {
		return Permit{}, false, err
	}
	if err := appendLine(f, line); err != nil {
		return Permit{}, false, fmt.Errorf("runrecord: append to %s: %w", path, err)
	}
	return p, true, nil
}

// admitRemote creates the run's binding object with p in it, or reads the
// binding that is there.
func admitRemote(ctx context.Context, o Options, p Permit) (Permit, bool, error) {
	blobs, err := o.Open(ctx, o.URL)
	if err != nil {
		return Permit{}, false, fmt.Errorf("runrecord: %w", err)
	}
	c, ok := blobs.(store.Creator)
	if !ok {
		return Permit{}, false, fmt.Errorf("runrecord: %s: %w: refusing to admit run %s", o.URL, store.ErrNotExclusive, p.RunID)
	}
	host, _ := os.Hostname()
	mine, err := json.Marshal(binding{RunID: p.RunID, Digest: p.Digest, Time: p.Time, Host: host, PID: os.Getpid(), Permit: &p})
	if err != nil {
		return Permit{}, false, err
	}
	mine = append(mine, '\n')
	key := bindingKey(p.RunID)
	cerr := c.Create(ctx, key, mine)
	switch {
	case cerr == nil:
		return p, true, nil
	case errors.Is(cerr, store.ErrNotExclusive):
		return Permit{}, false, fmt.Errorf("runrecord: %w: refusing to admit run %s", cerr, p.RunID)
	}
	// Bound already, or the create failed: look.
	data, err := store.GetAtMost(ctx, blobs, key, store.MaxRecord)
	if err != nil {
		return Permit{}, false, fmt.Errorf("runrecord: admit run %s: create %s: %w", p.RunID, key, cerr)
	}
	if bytes.Equal(data, mine) {
		return p, true, nil // our create landed; only its answer was lost
	}
	b, err := parseBinding(data, p.RunID, key, o.URL)
	if err != nil {
		return Permit{}, false, err
	}
	return heldPermit(p.RunID, b.Permit, o.URL+" "+key)
}

// Held returns the permit run o.RunID holds, or nil when the run is not
// bound yet or was started without a permit. It writes nothing: admission
// asks it first, so that a run admitted before keeps its permit whatever
// the gate says now. For a store that cannot be reached, it returns the
// permit this host kept in its spool (o.SpoolDir) when it bound the run
// against that store, as Open's offline resume does.
func Held(ctx context.Context, o Options) (*Permit, error) {
	if err := checkRunID(o.RunID); err != nil {
		return nil, err
	}
	remote, err := o.target()
	if err != nil {
		return nil, err
	}
	if remote {
		blobs, err := o.Open(ctx, o.URL)
		if err != nil {
			return nil, fmt.Errorf("runrecord: %w", err)
		}
		key := bindingKey(o.RunID)
		data, err := store.GetAtMost(ctx, blobs, key, store.MaxRecord)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			// As Open resumes offline (openRemote): the binding this host
			// kept when it bound the run against o.URL.
			if b, _ := spooledBinding(o.SpoolDir, o.RunID); b != nil && b.URL == o.URL && b.RunID == o.RunID {
				return b.Permit, nil
			}
			return nil, fmt.Errorf("runrecord: binding of run %s: %w", o.RunID, err)
		}
		b, err := parseBinding(data, o.RunID, key, o.URL)
		if err != nil {
			return nil, err
		}
		return b.Permit, nil
	}
	f, err := openFile(o.URL, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("runrecord: %w", err)
	}
	defer f.Close()
	b, err := readBinding(f, o.RunID)
	if err != nil {
		return nil, fmt.Errorf("runrecord: read %s: %w", o.URL, err)
	}
	return b.Permit, nil
}

// heldPermit is Admit's answer for a run that is bound already: its
// permit, or an error if it was started without one.
func heldPermit(runID string, held *Permit, where string) (Permit, bool, error) {
	if held == nil {
		return Permit{}, false, fmt.Errorf("runrecord: run %s was started without a permit (%s): it cannot be admitted now; admit a new run id", runID, where)
	}
	return *held, false, nil
}

// CheckPermit reports whether run runID, whose binding in the run record
// at url holds permit held (nil for none, also when the run is not bound
// yet), holds a permit for exactly digest d, with an error wrapping
// ErrNotPermitted if not, which names url: a run admitted into another
// record than the one searched is the usual cause. It checks only the
// claim: whether the permit checks out against the store is admission's
// to check.
func CheckPermit(runID string, held *Permit, d verify.Digest, url string) error {
	return checkPermit(runID, held, d, nil, url)
}

// checkPermit is Open's check with RequirePermit: CheckPermit, and, when
// want is set (Options.Permit), held must be exactly want. where names
// the record searched.
func checkPermit(runID string, held *Permit, d verify.Digest, want *Permit, where string) error {
	if held == nil {
		return fmt.Errorf("runrecord: run %s holds no permit in run record %s: %w", runID, where, ErrNotPermitted)
	}
	if held.Digest != d {
		return fmt.Errorf("runrecord: run %s's permit is for %s not %s (run record %s): %w", runID, held.Digest, d, where, ErrNotPermitted)
	}
	if want != nil && !equalPermits(held, want) {
		return fmt.Errorf("runrecord: run %s's permit changed since it was checked (run record %s): %w", runID, where, ErrNotPermitted)
	}
	return nil
}

// equalPermits reports whether a and b are the same permit, field for field.
func equalPermits(a, b *Permit) bool {
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && bytes.Equal(ja, jb)
}
