package runrecord

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

// Source is a run record to read: a local JSON Lines file or s3://bucket/prefix.
type Source struct {
	URL string
	// SpoolDir, when set, is the spool directory of the mounts of this
	// host: undelivered events in <SpoolDir>/<run-id>.jsonl are merged
	// (dedup by eventKey), for the runs that the spool's binding says were
	// recorded at URL.
	SpoolDir string
	// Open reaches a store URL; nil means store/dial.Open.
	Open func(ctx context.Context, url string) (store.Blobs, error)
}

// ErrNoRun is wrapped when the record has no such run.
var ErrNoRun = errors.New("the run record holds no such run")

// Run is everything the record holds about one run.
type Run struct {
	RunID   string
	Digest  verify.Digest
	Permit  *Permit
	Events  []Event // every event, ordered by time then host/pid then seq, duplicates removed
	Spooled int     // events merged from the spool that the record itself lacks
	Torn    int     // lines skipped because they did not parse (a torn last line)
}

// ReadRun returns everything the record at src holds about run runID,
// merged with what src.SpoolDir holds of it. A local file is read in one
// pass; a line that does not parse is skipped and counted in Torn when it
// names the run or names no run at all (a line cut short so early cannot
// be told apart). From a store it lists runs/<run-id>/ and GETs every
// event object (16 at a time). An error wraps ErrNoRun when neither the
// record nor the spool holds anything of the run.
func ReadRun(ctx context.Context, src Source, runID string) (*Run, error) {
	return readRun(ctx, src, runID, false)
}

// ReadConsumed returns only the run's consumed events, ordered as in
// Run.Events: what a resume seeds its consumed set with. From a store it
// lists the run's keys and GETs only the consumed objects; a local file
// is scanned once. An error wraps ErrNoRun as ReadRun's does.
func ReadConsumed(ctx context.Context, src Source, runID string) ([]Event, error) {
	r, err := readRun(ctx, src, runID, true)
	if err != nil {
		return nil, err
	}
	return r.Events, nil
}

// readRun is ReadRun, or with consumedOnly ReadConsumed.
func readRun(ctx context.Context, src Source, runID string, consumedOnly bool) (*Run, error) {
	if err := checkRunID(runID); err != nil {
		return nil, err
	}
	remote, err := src.target()
	if err != nil {
		return nil, err
	}
	var (
		c     collector
		found bool
	)
	if remote {
		found, err = readRunStore(ctx, src, runID, consumedOnly, &c)
	} else {
		found, err = readRunFile(ctx, src.URL, runID, consumedOnly, &c)
	}
	if err != nil {
		return nil, err
	}
	spooled, err := readSpool(src, runID)
	if err != nil {
		return nil, err
	}
	for _, s := range spooled {
		if consumedOnly && s.event.Event != ConsumedSet {
			continue
		}
		if c.add(s.key, s.event) {
			c.run.Spooled++
		}
	}
	if !found && len(c.run.Events) == 0 {
		return nil, fmt.Errorf("runrecord: %s: run %s: %w", src.URL, runID, ErrNoRun)
	}
	return c.finish(runID), nil
}

// target checks src.URL and reports whether it names a store (s3://),
// which src.Open reaches (set to store/dial.Open when nil), or a local file.
func (src *Source) target() (remote bool, err error) {
	o := Options{URL: src.URL, Open: src.Open}
	remote, err = o.target()
	src.Open = o.Open
	return remote, err
}

// collector gathers the events of one run, dropping those it has by key.
type collector struct {
	run  Run
	keys []string // the key of each event in run.Events
	seen map[string]bool
}

// add adds e (whose store key is key) unless an event with key is there
// already, and reports whether it did.
func (c *collector) add(key string, e Event) bool {
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	if c.seen[key] {
		return false
	}
	c.seen[key] = true
	c.run.Events = append(c.run.Events, e)
	c.keys = append(c.keys, key)
	return true
}

// finish orders the events and fills in the run's id, and its digest
// and permit from the first event when the binding did not. It returns
// c's run, which more add and finish calls may change.
func (c *collector) finish(runID string) *Run {
	r := &c.run
	r.RunID = runID
	idx := make([]int, len(r.Events))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp.Or(compareEvents(&r.Events[a], &r.Events[b]), strings.Compare(c.keys[a], c.keys[b]))
	})
	es, keys := make([]Event, len(idx)), make([]string, len(idx))
	for i, j := range idx {
		es[i], keys[i] = r.Events[j], c.keys[j]
	}
	r.Events, c.keys = es, keys
	if len(es) > 0 {
		if r.Digest == "" {
			r.Digest = es[0].Digest
		}
		if r.Permit == nil && es[0].Event == PermitEvent {
			r.Permit = es[0].Permit
		}
	}
	return r
}

// compareEvents orders events by time, then host, pid and seq.
func compareEvents(a, b *Event) int {
	return cmp.Or(a.Time.Compare(b.Time), strings.Compare(a.Host, b.Host), cmp.Compare(a.PID, b.PID), cmp.Compare(a.Seq, b.Seq))
}

// parseLine decodes one event line; false means it does not parse as
// an event (a torn line).
func parseLine(line []byte) (Event, bool) {
	var e Event
	if json.Unmarshal(line, &e) != nil || e.Event == "" || checkRunID(e.RunID) != nil {
		return Event{}, false
	}
	return e, true
}

// spoolEvent is one event read from a spool, with its store key.
type spoolEvent struct {
	key   string
	event Event
}

// readSpool returns the events in src.SpoolDir's spool of run runID, if
// the spool's local binding says they are for src.URL. A line still being
// written (Emit has not returned) does not parse and is left out.
func readSpool(src Source, runID string) ([]spoolEvent, error) {
	lines, err := spoolLines(src, runID)
	if err != nil {
		return nil, err
	}
	out := make([]spoolEvent, 0, len(lines))
	for _, line := range lines {
		if e, ok := parseLine(line); ok && e.RunID == runID {
			out = append(out, spoolEvent{key: eventKey(&e, line), event: e})
		}
	}
	return out, nil
}

// spoolLines returns the whole lines (newline included) of the spool of
// run runID in src.SpoolDir, if its local binding names src.URL.
func spoolLines(src Source, runID string) ([][]byte, error) {
	b, err := spooledBinding(src.SpoolDir, runID)
	if err != nil || b == nil || !sameURL(b.URL, src.URL) {
		return nil, err
	}
	data, err := readFile(filepath.Join(src.SpoolDir, runID+".jsonl"), maxSpool)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("runrecord: spool: %w", err)
	}
	var lines [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // being written
		}
		lines = append(lines, data[:i+1])
		data = data[i+1:]
	}
	return lines, nil
}

// sameURL reports whether record URLs a and b name the same record.
func sameURL(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}
