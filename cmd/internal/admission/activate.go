package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/gate"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

// ErrFenced is wrapped when a snapshot is excluded by a gate's fences: it
// was built at other watermarks than the gate's, or holds a revoked or
// benchmark member.
var ErrFenced = errors.New("excluded by the gate's fences")

// Activation is one `pinfs alias set` or `pinfs alias rollback`.
type Activation struct {
	Gate   string
	Digest verify.Digest
	// Expect is the generation the gate must be at when the change
	// commits; < 0 means any (the change then re-checks and retries after
	// a lost race). With Expect the change never retries.
	Expect int64
	// Policy checks the approvals; nil uses the policy kept with the gate.
	Policy *sign.Policy
	// Rollback points the gate back at a digest it had before.
	Rollback bool
	Reason   string
}

// Activate makes a.Digest the gate's snapshot with one conditional write:
// it commits only if the snapshot is approved under the policy, was built
// at exactly the gate's tombstone watermark and benchmark fence (for a
// rollback: not below the tombstone watermark), holds no revoked or
// benchmark member, and the gate has not moved since it was read. A gate
// that does not exist yet is created at the snapshot's watermarks. When a
// fence moved first the activation fails and the snapshot stays APPROVED:
// build a new manifest at the new watermark. Activating the digest the
// gate is at already, under the policy it keeps, makes the same checks and
// then commits nothing and returns the current record.
func Activate(ctx context.Context, st store.Store, a Activation) (*gate.Record, error) {
	g, err := gate.Open(st, a.Gate)
	if err != nil {
		return nil, err
	}
	c, err := verify.Fetch(ctx, st, a.Digest)
	if err != nil {
		return nil, err
	}
	m := c.Manifest
	op := "set"
	if a.Rollback {
		op = "rollback"
	}
	var unchanged *gate.Record
	r, err := g.Update(ctx, a.Expect < 0, func(cur *gate.Record) (*gate.Record, error) {
		var gen int64
		next := &gate.Record{Digest: a.Digest, Op: op, Reason: a.Reason}
		if cur != nil {
			gen = cur.Generation
			next.TombstoneWatermark, next.BenchmarkFence = cur.TombstoneWatermark, cur.BenchmarkFence
			next.Revocations, next.Benchmarks, next.Policy = cur.Revocations, cur.Benchmarks, cur.Policy
		} else {
			next.TombstoneWatermark, next.BenchmarkFence = deref(m.TombstoneWatermark), deref(m.BenchmarkFence)
		}
		if a.Expect >= 0 && gen != a.Expect {
			return nil, fmt.Errorf("gate %s is at generation %d, not the expected %d: %w", a.Gate, gen, a.Expect, store.ErrConflict)
		}
		if a.Rollback {
			if err := wasActive(ctx, g, cur, a.Digest); err != nil {
				return nil, err
			}
		}
		if err := builtAt(a.Gate, m, next, a.Rollback); err != nil {
			return nil, err
		}
		f, err := LoadFences(ctx, st, next)
		if err != nil {
			return nil, err
		}
		if err := f.Check(c.Table); err != nil {
			return nil, err
		}
		p, pd, err := policyFor(ctx, st, a.Policy, cur)
		if err != nil {
			return nil, err
		}
		if _, err := Approved(ctx, st, a.Digest, p); err != nil {
			return nil, fmt.Errorf("%s: %w", a.Digest, err)
		}
		if cur != nil && cur.Digest == a.Digest && cur.Policy == pd && !a.Rollback {
			unchanged = cur // checked like any activation, but nothing to commit
			return nil, errUnchanged
		}
		next.Policy = pd
		return next, nil
	})
	if errors.Is(err, errUnchanged) {
		return unchanged, nil
	}
	return r, err
}

// errUnchanged stops an activation of the digest the gate is at already:
// it commits nothing, so that running the same `alias set` again does not
// add generations.
var errUnchanged = errors.New("unchanged")

// builtAt checks a manifest's watermarks against the gate record it would
// become part of. An activation needs both equal; a rollback needs both
// not below the gate's, so that it never resurrects revoked data nor
// crosses a benchmark fence (and what it points at can be admitted).
func builtAt(name string, m *verify.Manifest, r *gate.Record, rollback bool) error {
	tw, bf := deref(m.TombstoneWatermark), deref(m.BenchmarkFence)
	switch {
	case rollback && tw < r.TombstoneWatermark:
		return fmt.Errorf("built at tombstone watermark %d, below gate %s's %d: a rollback must not resurrect revoked data: %w", tw, name, r.TombstoneWatermark, ErrFenced)
	case rollback && bf < r.BenchmarkFence:
		return fmt.Errorf("built at benchmark fence %d, below gate %s's %d: a rollback must not cross a benchmark fence: %w", bf, name, r.BenchmarkFence, ErrFenced)
	case rollback:
		return nil
	case tw != r.TombstoneWatermark:
		return fmt.Errorf("built at tombstone watermark %d, gate %s is at %d: build a new manifest at the gate's watermark: %w", tw, name, r.TombstoneWatermark, ErrFenced)
	case bf != r.BenchmarkFence:
		return fmt.Errorf("built at benchmark fence %d, gate %s is at %d: build a new manifest at the gate's fence: %w", bf, name, r.BenchmarkFence, ErrFenced)
	}
	return nil
}

// wasActive checks that d was the digest of an earlier generation of g:
// a rollback goes back, it never introduces a snapshot.
func wasActive(ctx context.Context, g *gate.Gate, cur *gate.Record, d verify.Digest) error {
	if cur == nil {
		return fmt.Errorf("gate %s does not exist: nothing to roll back: %w", g.Name(), gate.ErrNoGate)
	}
	if cur.Digest == d {
		return fmt.Errorf("gate %s is at %s already (generation %d)", g.Name(), d, cur.Generation)
	}
	hist, err := g.Log(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(hist, func(r *gate.Record) bool { return r.Digest == d }) {
		return fmt.Errorf("%s was never active in gate %s: use pinfs alias set", d, g.Name())
	}
	return nil
}
