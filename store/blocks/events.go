package blocks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/cache"
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
	FromTier    = "tier" // a shared cache tier (Config.Content)
)

// Event is an integrity or storage event on the read path. Off and Len are
// the byte range of the block concerned; From is set for mismatches.
type Event struct {
	Kind   string // KindMismatch, KindVersionMissing or KindFetchFailed
	Member *Member
	Off    int64
	Len    int64
	From   string // FromNetwork, FromTier or FromDisk
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
// been recorded. If it could not be, report counts that, keeps ev as owed
// to the next read of its block (Reader.settle) and returns an error
// wrapping ErrNotRecorded and cause (the error of the read, which may be
// nil for a healed block); otherwise it returns cause.
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
	r.owed.add(ev)
	return notRecorded(ev, cause, err)
}

// notRecorded returns the error of a read whose event ev the Reporter
// refused with err; cause is the read's own error, nil if the block loaded.
func notRecorded(ev Event, cause, err error) error {
	if cause == nil {
		return fmt.Errorf("%w: %s event of %s bytes %d+%d: %w", ErrNotRecorded, ev.Kind, ev.Member.Path, ev.Off, ev.Len, err)
	}
	return fmt.Errorf("%w (%w: %s event: %v)", cause, ErrNotRecorded, ev.Kind, err)
}

// settle records the events of block i of m that could not be recorded
// when they happened (owed), before the block is read: nil if there are
// none or they are recorded now, and otherwise an error wrapping
// ErrNotRecorded, which fails the read. A flight whose event is not
// recorded fails only the readers waiting for it; readahead and Warm may
// have none, and the next read of the block, which would fetch it afresh
// and could well succeed, would otherwise serve it with the event lost.
// Concurrent reads of the block share one attempt, so that an event is
// recorded once.
func (r *Reader) settle(ctx context.Context, m *Member, i int64) error {
	k := key(m, i)
	_, err, _ := r.replays.Do(ctx, k, func() (struct{}, error) {
		// The events stay owed until they are recorded, so that a read
		// arriving meanwhile waits for this attempt instead of reading.
		for _, ev := range r.owed.get(k) {
			if err := r.cfg.Reporter.Report(r.ctx, ev); err != nil {
				return struct{}{}, notRecorded(ev, nil, err)
			}
			r.owed.drop(k)
		}
		return struct{}{}, nil
	})
	return err
}

// maxOwed bounds the events kept for a later read; past it an event that
// cannot be recorded fails only the readers of its flight (the Reporter
// has seen it, and Stats.EventsUnrecorded counts it).
const maxOwed = 4096

// owed holds, per block, the events the Reporter could not make durable,
// in order, until a read of the block records them (Reader.settle). Its
// methods are safe for concurrent use; n lets a read skip the lock when
// nothing is owed.
type owed struct {
	n  atomic.Int64 // events in m; changed under mu
	mu sync.Mutex
	m  map[cache.Key][]Event
}

// add keeps ev for its block, unless maxOwed events are kept already.
func (o *owed) add(ev Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n.Load() >= maxOwed {
		return
	}
	k := key(ev.Member, ev.Off/BlockSize)
	if o.m == nil {
		o.m = make(map[cache.Key][]Event)
	}
	o.m[k] = append(o.m[k], ev)
	o.n.Add(1)
}

// has reports whether block k has events owed.
func (o *owed) has(k cache.Key) bool {
	if o.n.Load() == 0 {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.m[k]) > 0
}

// get returns block k's events owed, oldest first.
func (o *owed) get(k cache.Key) []Event {
	if o.n.Load() == 0 {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Event(nil), o.m[k]...)
}

// drop forgets block k's oldest event owed, once it is recorded. Only
// settle drops, one at a time per block, so the oldest is the one it
// recorded; add only appends.
func (o *owed) drop(k cache.Key) {
	o.mu.Lock()
	defer o.mu.Unlock()
	evs := o.m[k]
	if len(evs) == 0 {
		return
	}
	if len(evs) == 1 {
		delete(o.m, k)
	} else {
		o.m[k] = evs[1:]
	}
	o.n.Add(-1)
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
