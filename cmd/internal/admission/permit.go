package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/gate"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

// ErrBadPermit is wrapped when a permit read back from a run record does
// not check out against the store.
var ErrBadPermit = errors.New("does not check out against the store")

// Permitted is a run's permit that admission granted, or read back from
// the run record and checked against the store. Only Admit and
// CheckPermit make one, so code that holds a Permitted holds a permit
// that checked out, not one that someone appended to a shared record.
type Permitted struct {
	permit runrecord.Permit
}

// Permit returns the checked permit.
func (v *Permitted) Permit() runrecord.Permit {
	p := v.permit
	p.Approvals = slices.Clone(p.Approvals)
	return p
}

// CheckPermit is `pinfs mount --require-permit`'s check, made before
// anything is mounted or written: run o.RunID must hold a permit (read
// from its binding in the run record at o.URL) for exactly digest d, and
// that permit must check out against the store:
//
//   - d is APPROVED under pol, or, with pol nil, for a permit through a
//     gate, under the policy the gate kept at the permit's generation, which
//     the permit must name. A permit by digest checks out only under pol:
//     the policy it names is as much a claim as the permit, and anyone who
//     can write the store can keep a policy of their own there and approve
//     under it;
//   - through a gate, the gate's history (its hash chain, checked back to
//     generation 1) holds the permit's generation, pointing at d, and at
//     that generation's watermarks and fences d was admissible, with the
//     permit's watermarks; by digest, the permit has the manifest's;
//   - d is for the permit's purpose.
//
// Later generations and fences are not consulted: they never change an
// admitted run's digest. A run without a permit for d fails with an error
// wrapping runrecord.ErrNotPermitted; a permit that does not check out,
// with one that names the run and wraps ErrBadPermit.
func CheckPermit(ctx context.Context, st store.Store, o runrecord.Options, d verify.Digest, pol *sign.Policy) (*Permitted, error) {
	held, err := runrecord.Held(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := runrecord.CheckPermit(o.RunID, held, d, o.URL); err != nil {
		return nil, err
	}
	return checkHeld(ctx, st, o.RunID, *held, pol)
}

// checkHeld checks the permit p that run runID's binding holds (see
// CheckPermit).
func checkHeld(ctx context.Context, st store.Store, runID string, p runrecord.Permit, pol *sign.Policy) (*Permitted, error) {
	if p.Gate == "" && pol == nil {
		return nil, fmt.Errorf("run %s was admitted by digest: its permit is checked only under the trust policy given now, not one it names: %w", runID, ErrNoPolicy)
	}
	if err := recheck(ctx, st, runID, p, pol); err != nil {
		return nil, fmt.Errorf("run %s's permit %w: %w", runID, ErrBadPermit, err)
	}
	return &Permitted{permit: p}, nil
}

// recheck grants p's snapshot again at the gate record p names and
// compares the result with p.
func recheck(ctx context.Context, st store.Store, runID string, p runrecord.Permit, pol *sign.Policy) error {
	if p.RunID != runID {
		return fmt.Errorf("it names run %q", p.RunID)
	}
	if _, err := verify.ParseDigest(string(p.Digest)); err != nil {
		return err
	}
	var rec *gate.Record
	if p.Gate != "" {
		r, err := grantedAt(ctx, st, p)
		if err != nil {
			return err
		}
		rec = r
	} else if p.Generation != 0 {
		return fmt.Errorf("it names generation %d but no gate", p.Generation)
	}
	want, err := grant(ctx, st, p.Digest, p.Purpose, rec, func() (*sign.Policy, verify.Digest, error) {
		return permitPolicy(ctx, st, p, rec, pol)
	})
	if err != nil {
		return err
	}
	if want.TombstoneWatermark != p.TombstoneWatermark || want.BenchmarkFence != p.BenchmarkFence {
		return fmt.Errorf("it says tombstone watermark %d and benchmark fence %d, the store says %d and %d",
			p.TombstoneWatermark, p.BenchmarkFence, want.TombstoneWatermark, want.BenchmarkFence)
	}
	return nil
}

// grantedAt returns the record of gate p.Gate at generation p.Generation,
// from the gate's checked history, which must point at p.Digest.
func grantedAt(ctx context.Context, st store.Store, p runrecord.Permit) (*gate.Record, error) {
	g, err := gate.Open(st, p.Gate)
	if err != nil {
		return nil, err
	}
	hist, err := g.Log(ctx)
	if err != nil {
		return nil, err
	}
	top := hist[0].Generation
	if p.Generation < 1 || p.Generation > top {
		return nil, fmt.Errorf("gate %s has no generation %d (it is at %d)", p.Gate, p.Generation, top)
	}
	rec := hist[top-p.Generation]
	switch {
	case rec.Digest == "":
		return nil, fmt.Errorf("gate %s generation %d has no active snapshot, not %s", p.Gate, p.Generation, p.Digest)
	case rec.Digest != p.Digest:
		return nil, fmt.Errorf("gate %s generation %d points at %s, not %s", p.Gate, p.Generation, rec.Digest, p.Digest)
	}
	return rec, nil
}

// permitPolicy returns the policy a held permit p is checked under, the
// one in force (PolicyInForce): pol when given; else, through gate record
// rec, the policy that record keeps, which p must name. A permit by digest
// (rec nil) needs pol.
func permitPolicy(ctx context.Context, st store.Blobs, p runrecord.Permit, rec *gate.Record, pol *sign.Policy) (*sign.Policy, verify.Digest, error) {
	switch {
	case pol != nil:
	case rec == nil:
		return nil, "", fmt.Errorf("it was admitted by digest: %w", ErrNoPolicy)
	case rec.Policy == "":
		return nil, "", fmt.Errorf("gate %s generation %d keeps no trust policy: %w", rec.Name, rec.Generation, ErrNoPolicy)
	case p.Policy != rec.Policy:
		return nil, "", fmt.Errorf("it names trust policy %q, gate %s generation %d keeps %s: %w", p.Policy, rec.Name, rec.Generation, rec.Policy, ErrNoPolicy)
	}
	return PolicyInForce(ctx, st, pol, rec)
}
