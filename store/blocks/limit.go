package blocks

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// errNoSlot reports that the limiter's next free slot comes after the
// deadline of the request that asked for it.
var errNoSlot = errors.New("no request slot before the read timeout")

// limiter is the Reader's client-side rate limit, shared by every fetch,
// so that when the store says slow down all of them do, as the AWS SDK's
// adaptive retry mode does. While the store does not throttle it lets
// every request through at once. A throttled answer halves the rate at
// which requests may start (it doubles the gap between two starts, from
// min up to max, so the rate never falls under 1/max) and holds every
// request off for one jittered gap; only
// one halving counts per gap, so that the answers to a burst of parallel
// requests halve the rate once. Each answer that is not throttled raises
// the rate additively, by a quarter of 1/min, and the limit goes away when
// the gap falls under min/8. Its methods are safe for concurrent use; mu
// guards the fields below it.
type limiter struct {
	min, max time.Duration

	mu   sync.Mutex
	gap  time.Duration // between two request starts; 0: no limit
	next time.Time     // the earliest start of the next request
	calm time.Time     // throttled answers before this do not halve the rate
}

func newLimiter(min, max time.Duration) *limiter { return &limiter{min: min, max: max} }

// wait takes the next request slot and waits for it. It fails at once
// with errNoSlot if the slot comes after ctx's deadline, and with
// ctx.Err() if ctx ends while it waits.
func (l *limiter) wait(ctx context.Context) error {
	l.mu.Lock()
	if l.gap == 0 {
		l.mu.Unlock()
		return nil
	}
	at := time.Now()
	if l.next.After(at) {
		at = l.next
	}
	if dl, ok := ctx.Deadline(); ok && at.After(dl) {
		l.mu.Unlock()
		return errNoSlot
	}
	l.next = at.Add(l.gap)
	l.mu.Unlock()
	return pause(ctx, time.Until(at))
}

// throttled halves the rate and holds requests off: the store asked to
// slow down.
func (l *limiter) throttled() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if now.Before(l.calm) {
		return
	}
	l.gap = min(max(2*l.gap, l.min), l.max)
	if hold := now.Add(l.gap/2 + rand.N(l.gap/2+1)); hold.After(l.next) {
		l.next = hold
	}
	l.calm = now.Add(l.gap)
}

// ok raises the rate after an answer that was not throttled.
func (l *limiter) ok() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gap == 0 {
		return
	}
	rate := 1/l.gap.Seconds() + 1/(4*l.min.Seconds())
	l.gap = time.Duration(float64(time.Second) / rate)
	if l.gap < l.min/8 {
		l.gap = 0
	}
}

// limited returns the current gap between request starts (0: no limit).
func (l *limiter) limited() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gap
}
