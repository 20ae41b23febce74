package admission

import (
	"context"
	"fmt"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/gate"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

// Request is one `pinfs admit`.
type Request struct {
	// Target is a gate name, resolved once, or a snapshot digest.
	Target  string
	Purpose string
	// Policy checks the approvals; nil uses the gate's.
	Policy *sign.Policy
	// Record says where the run record is and which run (RunID "" makes
	// a new one).
	Record runrecord.Options
}

// Admit checks that the snapshot named by r.Target may be read for
// r.Purpose and writes a permit into the run's binding. It resolves a
// gate name once; the snapshot must have the manifest purpose r.Purpose,
// be approved under the policy, and, admitted through a gate, be built at
// the gate's watermarks and hold no revoked or benchmark member. It
// returns the permit the run holds and whether this call created it.
//
// A run admitted before keeps its permit and digest, whatever the gate
// says now (a later generation or fence never changes an admitted run),
// so that a resumed job that admits again gets the same digest. But the
// held permit is a claim read from the run record, which others may
// write: it is returned only if it was granted for the same target (gate
// name, or digest) and purpose as r, under the policy given now (see
// kept), and if it checks out against the store (see CheckPermit);
// otherwise Admit fails and writes nothing.
func Admit(ctx context.Context, st store.Store, r Request) (*Permitted, bool, error) {
	if r.Record.RunID != "" {
		held, err := runrecord.Held(ctx, r.Record)
		if err != nil {
			return nil, false, err
		}
		if held != nil {
			return kept(ctx, st, r, *held)
		}
	}
	var cur *gate.Record
	d, err := verify.ParseDigest(r.Target)
	if err != nil {
		g, err := gate.Open(st, r.Target)
		if err != nil {
			return nil, false, err
		}
		if cur, err = g.Head(ctx); err != nil {
			return nil, false, err
		}
		if cur.Digest == "" {
			return nil, false, fmt.Errorf("gate %s has no active snapshot (generation %d)", cur.Name, cur.Generation)
		}
		d = cur.Digest
	}
	p, err := grant(ctx, st, d, r.Purpose, cur, func() (*sign.Policy, verify.Digest, error) {
		return policyFor(ctx, st, r.Policy, cur)
	})
	if err != nil {
		return nil, false, err
	}
	p.Time = time.Now().UTC()
	o := r.Record
	o.Digest = p.Digest
	held, created, err := runrecord.Admit(ctx, o, p)
	if err != nil {
		return nil, false, err
	}
	if created {
		return &Permitted{permit: held}, true, nil
	}
	return kept(ctx, st, r, held) // admitted concurrently
}

// grant checks that snapshot d may be read for purpose, through gate
// record rec (nil: admitted by digest), under the policy that policy
// returns (asked only once everything else passed), and returns the
// permit that grants it, without run id or time.
func grant(ctx context.Context, st store.Store, d verify.Digest, purpose string, rec *gate.Record,
	policy func() (*sign.Policy, verify.Digest, error)) (runrecord.Permit, error) {
	p := runrecord.Permit{Digest: d, Purpose: purpose}
	c, err := verify.Fetch(ctx, st, d)
	if err != nil {
		return p, err
	}
	if c.Manifest.Purpose != purpose {
		return p, fmt.Errorf("%s is for purpose %q, not %q", d, c.Manifest.Purpose, purpose)
	}
	if rec != nil {
		if err := builtAt(rec.Name, c.Manifest, rec, false); err != nil {
			return p, fmt.Errorf("%s (gate %s generation %d): %w", d, rec.Name, rec.Generation, err)
		}
		f, err := LoadFences(ctx, st, rec)
		if err != nil {
			return p, err
		}
		if err := f.Check(c.Table); err != nil {
			return p, err
		}
		p.Gate, p.Generation = rec.Name, rec.Generation
		p.TombstoneWatermark, p.BenchmarkFence = rec.TombstoneWatermark, rec.BenchmarkFence
	} else {
		p.TombstoneWatermark, p.BenchmarkFence = deref(c.Manifest.TombstoneWatermark), deref(c.Manifest.BenchmarkFence)
	}
	pol, pd, err := policy()
	if err != nil {
		return p, err
	}
	sigs, err := Approved(ctx, st, d, pol)
	if err != nil {
		return p, fmt.Errorf("%s: %w", d, err)
	}
	p.Policy = pd
	for _, s := range sigs {
		p.Approvals = append(p.Approvals, s.KeyID)
	}
	return p, nil
}

// kept is Admit's answer for a run that holds a permit already: that
// permit, whatever the gate says now, since a later generation or fence
// never changes an admitted run's digest; but only for the same target
// and purpose as r, under the policy given now, and only once it checks
// out (checkHeld). The policy given now is r.Policy, else, for a permit
// through a gate, the policy the gate's current head keeps (not the one
// kept at the permit's generation); the permit must have been granted
// under that policy, and its digest is checked under it. A permit by
// digest needs r.Policy.
func kept(ctx context.Context, st store.Store, r Request, held runrecord.Permit) (*Permitted, bool, error) {
	if held.Purpose != r.Purpose {
		return nil, false, fmt.Errorf("run %s was admitted for purpose %q, not %q", held.RunID, held.Purpose, r.Purpose)
	}
	target := held.Gate
	if target == "" {
		target = held.Digest.String()
	}
	if target != r.Target {
		return nil, false, fmt.Errorf("run %s was admitted for %s, not %s", held.RunID, target, r.Target)
	}
	pol, given := r.Policy, "--policy"
	if pol == nil && held.Gate != "" {
		p, err := policyNow(ctx, st, held.Gate)
		if err != nil {
			return nil, false, fmt.Errorf("run %s: %w", held.RunID, err)
		}
		pol, given = p, "the policy gate "+held.Gate+" keeps now"
	}
	if pol != nil && held.Policy != pol.Digest() {
		return nil, false, fmt.Errorf("run %s was admitted under trust policy %s, not %s (%s)", held.RunID, held.Policy, pol.Digest(), given)
	}
	id := r.Record.RunID
	if id == "" {
		id = held.RunID // this call's own new run id, bound concurrently
	}
	v, err := checkHeld(ctx, st, id, held, pol)
	return v, false, err
}

// policyNow returns the trust policy gate name's current head keeps.
func policyNow(ctx context.Context, st store.Store, name string) (*sign.Policy, error) {
	g, err := gate.Open(st, name)
	if err != nil {
		return nil, err
	}
	cur, err := g.Head(ctx)
	if err != nil {
		return nil, err
	}
	p, _, err := policyFor(ctx, st, nil, cur)
	return p, err
}
