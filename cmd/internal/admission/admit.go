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
// returns the permit the run holds and whether this call created it. A
// run admitted before keeps its permit and digest, whatever the gate says
// now (a later generation or fence never changes an admitted run), so
// that a resumed job that admits again gets the same digest; it is
// returned without any check but the purpose.
func Admit(ctx context.Context, st store.Store, r Request) (runrecord.Permit, bool, error) {
	p := runrecord.Permit{Purpose: r.Purpose}
	if r.Record.RunID != "" {
		held, err := runrecord.Held(ctx, r.Record)
		if err != nil {
			return p, false, err
		}
		if held != nil {
			return kept(*held, r.Purpose)
		}
	}
	var cur *gate.Record
	if d, err := verify.ParseDigest(r.Target); err == nil {
		p.Digest = d
	} else {
		g, err := gate.Open(st, r.Target)
		if err != nil {
			return p, false, err
		}
		if cur, err = g.Head(ctx); err != nil {
			return p, false, err
		}
		if cur.Digest == "" {
			return p, false, fmt.Errorf("gate %s has no active snapshot (generation %d)", cur.Name, cur.Generation)
		}
		p.Digest, p.Gate, p.Generation = cur.Digest, cur.Name, cur.Generation
		p.TombstoneWatermark, p.BenchmarkFence = cur.TombstoneWatermark, cur.BenchmarkFence
	}
	c, err := verify.Fetch(ctx, st, p.Digest)
	if err != nil {
		return p, false, err
	}
	if c.Manifest.Purpose != r.Purpose {
		return p, false, fmt.Errorf("%s is for purpose %q, not %q", p.Digest, c.Manifest.Purpose, r.Purpose)
	}
	if cur != nil {
		if err := builtAt(cur.Name, c.Manifest, cur, false); err != nil {
			return p, false, fmt.Errorf("%s (gate %s generation %d): %w", p.Digest, cur.Name, cur.Generation, err)
		}
		f, err := LoadFences(ctx, st, cur)
		if err != nil {
			return p, false, err
		}
		if err := f.Check(c.Table); err != nil {
			return p, false, err
		}
	} else {
		p.TombstoneWatermark, p.BenchmarkFence = deref(c.Manifest.TombstoneWatermark), deref(c.Manifest.BenchmarkFence)
	}
	pol, pd, err := policyFor(ctx, st, r.Policy, cur)
	if err != nil {
		return p, false, err
	}
	sigs, err := Approved(ctx, st, p.Digest, pol)
	if err != nil {
		return p, false, fmt.Errorf("%s: %w", p.Digest, err)
	}
	p.Policy = pd
	for _, s := range sigs {
		p.Approvals = append(p.Approvals, s.KeyID)
	}
	p.Time = time.Now().UTC()
	o := r.Record
	o.Digest = p.Digest
	held, created, err := runrecord.Admit(ctx, o, p)
	if err != nil || created {
		return held, created, err
	}
	return kept(held, r.Purpose) // admitted concurrently
}

// kept is Admit's answer for a run that holds a permit already: that
// permit, whatever the gate says now, since a later generation or fence
// never changes an admitted run's digest; but only for the same purpose.
func kept(held runrecord.Permit, purpose string) (runrecord.Permit, bool, error) {
	if held.Purpose != purpose {
		return held, false, fmt.Errorf("run %s was admitted for purpose %q, not %q", held.RunID, held.Purpose, purpose)
	}
	return held, false, nil
}
