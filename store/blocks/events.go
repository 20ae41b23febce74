package blocks

import (
	"context"
	"errors"
	"fmt"

	"github.com/pinfs/pinfs/store"
)

// Event kinds.
const (
	KindMismatch       = "mismatch"        // block bytes failed verification
	KindVersionMissing = "version_missing" // the pinned object version does not exist
	KindFetchFailed    = "fetch_failed"    // any other storage failure, after retries
)

// Event sources of a mismatch.
const (
	FromNetwork = "network"
	FromDisk    = "disk"
)

// Event is an integrity or storage event on the read path. Off and Len are
// the byte range of the block concerned; From is set for mismatches.
type Event struct {
	Kind   string // KindMismatch, KindVersionMissing or KindFetchFailed
	Member *Member
	Off    int64
	Len    int64
	From   string // FromNetwork or FromDisk
	Err    error
}

// Reporter receives events. Report must return only once the event is
// durable, or an error if it cannot be made durable: the read the event
// concerns waits for it, and fails with ErrNotRecorded on an error. Report
// is called from the Reader's shared fetches, possibly concurrently.
type Reporter interface {
	Report(ctx context.Context, ev Event) error
}

// report counts ev and hands it to the Reporter, and returns once it has
// been recorded. If it could not be, report counts that and returns an
// error wrapping ErrNotRecorded and cause (the error of the read, which
// may be nil for a healed block); otherwise it returns cause.
func (r *Reader) report(ev Event, cause error) error {
	switch ev.Kind {
	case KindVersionMissing:
		r.st.versionMissing.Add(1)
	case KindFetchFailed:
		r.st.fetchFailed.Add(1)
	}
	if r.cfg.Reporter == nil {
		return cause
	}
	err := r.cfg.Reporter.Report(r.ctx, ev)
	if err == nil {
		return cause
	}
	r.st.eventsUnrecorded.Add(1)
	if cause == nil {
		return fmt.Errorf("%w: %s event of %s bytes %d+%d: %w", ErrNotRecorded, ev.Kind, ev.Member.Path, ev.Off, ev.Len, err)
	}
	return fmt.Errorf("%w (%w: %s event: %v)", cause, ErrNotRecorded, ev.Kind, err)
}

// failed reports a storage failure of block i of m, unless the Reader is
// closing, and returns the error to give the readers.
func (r *Reader) failed(ctx context.Context, m *Member, i int64, err error) error {
	off, n := blockRange(m, i)
	err = fmt.Errorf("blocks: %s (%v) bytes %d+%d: %w", m.Path, m.Object, off, n, err)
	if r.ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	if ctx.Err() != nil && !errors.Is(err, ErrReadTimeout) {
		// The deadline passed in a step that does not say so itself.
		err = fmt.Errorf("%w (%v): %v", ErrReadTimeout, r.cfg.ReadTimeout, err)
	}
	kind := KindFetchFailed
	if errors.Is(err, store.ErrNotFound) && !errors.Is(err, errOutboard) {
		kind = KindVersionMissing
	}
	return r.report(Event{Kind: kind, Member: m, Off: off, Len: n, Err: err}, err)
}
