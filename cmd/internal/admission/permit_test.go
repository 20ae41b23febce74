package admission

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

// plant writes p as run id's binding in the record without any check, as
// anyone who can append to a shared record can.
func (r runs) plant(id string, p runrecord.Permit) {
	r.t.Helper()
	if _, created, err := runrecord.Admit(r.t.Context(), runrecord.Options{URL: r.url, RunID: id}, p); err != nil || !created {
		r.t.Fatalf("plant a permit for %s: created %v, %v", id, created, err)
	}
}

// TestHeldPermitChecked: a permit planted in the run record for a snapshot
// that was never approved, or that claims a gate generation the gate's
// history does not hold, is not returned by Admit and does not pass
// CheckPermit (mount --require-permit); a real one does, also after the
// gate moved on and fenced (a later generation never changes an admitted
// run).
func TestHeldPermitChecked(t *testing.T) {
	st, kr, rs := newLocal(t), newKeyring(t), newRuns(t)
	alice := kr.signer("alice")
	kr.signer("bob")
	p, bobs := kr.policy(1, "alice"), kr.policy(1, "bob")
	ctx := t.Context()
	d1 := approved(t, st, at(1, 0), map[string]string{"a": "1", "b": "1"}, alice)
	d2 := pinFiles(t, st, at(1, 0), map[string]string{"a": "2"}) // validated, never approved
	validate(t, st, d2)
	activate(t, st, Activation{Gate: "prod", Digest: d1, Expect: -1, Policy: p})
	if _, err := SavePolicy(ctx, st, bobs); err != nil {
		t.Fatal(err)
	}

	// The reproduction: run job-42 holds a hand-written permit for d2.
	forged := runrecord.Permit{Digest: d2, Purpose: purpose, Gate: "prod", Generation: 1, TombstoneWatermark: 1, Policy: p.Digest()}
	rs.plant("job-42", forged)
	if v, _, err := Admit(ctx, st, Request{Target: "prod", Purpose: purpose, Policy: p, Record: runrecord.Options{URL: rs.url, RunID: "job-42"}}); err == nil ||
		!errors.Is(err, ErrBadPermit) || !strings.Contains(err.Error(), "run job-42") || !strings.Contains(err.Error(), "generation 1 points at") {
		t.Fatalf("admit prod for job-42 holding a forged permit: %v, %v; want a refusal naming the run", v, err)
	}

	for i, tc := range []struct {
		name string
		p    runrecord.Permit
		pol  *sign.Policy
		is   error
		want string
	}{
		{"a generation pointing elsewhere", forged, nil, ErrBadPermit, "gate prod generation 1 points at"},
		{"a generation pointing elsewhere, with --policy", forged, p, ErrBadPermit, "gate prod generation 1 points at"},
		{"a generation the gate never had", runrecord.Permit{Digest: d1, Purpose: purpose, Gate: "prod", Generation: 7, TombstoneWatermark: 1, Policy: p.Digest()},
			nil, ErrBadPermit, "gate prod has no generation 7"},
		{"no such gate", runrecord.Permit{Digest: d1, Purpose: purpose, Gate: "nosuch", Generation: 1, Policy: p.Digest()}, nil, ErrBadPermit, "no such gate"},
		{"by digest, unapproved", runrecord.Permit{Digest: d2, Purpose: purpose, TombstoneWatermark: 1, Policy: p.Digest()}, p, sign.ErrNotApproved, "0 of 1"},
		{"by digest, approved under a policy not given", runrecord.Permit{Digest: d1, Purpose: purpose, TombstoneWatermark: 1, Policy: p.Digest()},
			bobs, sign.ErrNotApproved, "0 of 1"},
		{"a policy the gate did not keep", runrecord.Permit{Digest: d1, Purpose: purpose, Gate: "prod", Generation: 1, TombstoneWatermark: 1, Policy: bobs.Digest()},
			nil, ErrNoPolicy, "gate prod generation 1 keeps"},
		{"other watermarks", runrecord.Permit{Digest: d1, Purpose: purpose, Gate: "prod", Generation: 1, TombstoneWatermark: 5, Policy: p.Digest()},
			nil, ErrBadPermit, "tombstone watermark 5"},
		{"another purpose", runrecord.Permit{Digest: d1, Purpose: "evaluation", Gate: "prod", Generation: 1, TombstoneWatermark: 1, Policy: p.Digest()},
			nil, ErrBadPermit, `is for purpose "training", not "evaluation"`},
	} {
		id := fmt.Sprintf("job-%d", i)
		rs.plant(id, tc.p)
		_, err := CheckPermit(ctx, st, runrecord.Options{URL: rs.url, RunID: id}, tc.p.Digest, tc.pol)
		if err == nil || !errors.Is(err, ErrBadPermit) || !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "run "+id) {
			t.Errorf("%s: CheckPermit = %v; want %v saying %q", tc.name, err, tc.is, tc.want)
		}
	}

	// A real permit checks out, by gate and by digest, and Admit returns it
	// again only for the same target and policy.
	if _, _, err := rs.admit(st, "prod", "run-ok", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rs.admit(st, d1.String(), "run-d", p); err != nil {
		t.Fatal(err)
	}
	check := func(id string, d verify.Digest, pol *sign.Policy) {
		t.Helper()
		v, err := CheckPermit(ctx, st, runrecord.Options{URL: rs.url, RunID: id}, d, pol)
		if err != nil || v.Permit().Digest != d || v.Permit().RunID != id {
			t.Fatalf("CheckPermit of %s for %s: %+v, %v", id, d, v, err)
		}
	}
	check("run-ok", d1, nil)
	check("run-ok", d1, p)
	check("run-d", d1, p)
	// A run without a permit for the digest is refused naming the record
	// searched: admitted into another record is the usual cause.
	for id, d := range map[string]verify.Digest{"run-none": d1, "run-ok": d2} {
		if _, err := CheckPermit(ctx, st, runrecord.Options{URL: rs.url, RunID: id}, d, p); !errors.Is(err, runrecord.ErrNotPermitted) ||
			!strings.Contains(err.Error(), "run record "+rs.url) {
			t.Errorf("CheckPermit of %s for %s: %v; want ErrNotPermitted naming run record %s", id, d, err, rs.url)
		}
	}
	for _, tc := range []struct {
		target string
		pol    *sign.Policy
		want   string
	}{
		{d1.String(), p, "run run-ok was admitted for prod, not " + d1.String()},
		{"prod", bobs, "run run-ok was admitted under trust policy " + p.Digest().String()},
	} {
		if _, _, err := rs.admit(st, tc.target, "run-ok", tc.pol); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("admit run-ok again for %s: %v; want %q", tc.target, err, tc.want)
		}
	}
	if _, _, err := rs.admit(st, d1.String(), "run-d", nil); !errors.Is(err, ErrNoPolicy) {
		t.Errorf("admit run-d again by digest without a policy: %v; want ErrNoPolicy", err)
	}

	// The gate moves on and fences d1's member b: run-ok keeps its permit.
	d3 := approved(t, st, at(2, 0), map[string]string{"a": "3"}, alice)
	fence(t, st, FenceChange{Gate: "prod", Tombstone: 2, Entries: []string{"b"}})
	activate(t, st, Activation{Gate: "prod", Digest: d3, Expect: 2})
	check("run-ok", d1, nil)
	if held, created, err := rs.admit(st, "prod", "run-ok", nil); err != nil || created || held.Digest != d1 {
		t.Fatalf("admit run-ok after the gate moved: %+v, %v; want its permit for %s", held, err, d1)
	}
}

// TestMountRefusesChangedPermit: the record must hold exactly the permit
// that was checked (runrecord.Options.Permit): a binding that changed
// between the check and the mount is refused.
func TestMountRefusesChangedPermit(t *testing.T) {
	st, kr, rs := newLocal(t), newKeyring(t), newRuns(t)
	alice := kr.signer("alice")
	p := kr.policy(1, "alice")
	d1 := approved(t, st, at(0, 0), map[string]string{"a": "1"}, alice)
	activate(t, st, Activation{Gate: "prod", Digest: d1, Expect: -1, Policy: p})
	if _, _, err := rs.admit(st, "prod", "run-1", nil); err != nil {
		t.Fatal(err)
	}
	v, err := CheckPermit(t.Context(), st, runrecord.Options{URL: rs.url, RunID: "run-1"}, d1, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := v.Permit()
	other.Generation = 2
	_, err = runrecord.Open(t.Context(), runrecord.Options{URL: rs.url, RunID: "run-1", Digest: d1, RequirePermit: true, Permit: &other})
	if !errors.Is(err, runrecord.ErrNotPermitted) || !strings.Contains(err.Error(), "changed since it was checked") {
		t.Fatalf("Open with another permit than the run's: %v; want ErrNotPermitted", err)
	}
	want := v.Permit()
	rec, err := runrecord.Open(t.Context(), runrecord.Options{URL: rs.url, RunID: "run-1", Digest: d1, RequirePermit: true, Permit: &want})
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestHeldPermitByDigestNeedsPolicy: a run admitted by digest under a
// policy that anyone who can write the store can keep there (mallory's,
// with mallory's approval) is not mounted (CheckPermit) or returned again
// (Admit) without the caller's own policy, which refuses it.
func TestHeldPermitByDigestNeedsPolicy(t *testing.T) {
	st, kr, rs := newLocal(t), newKeyring(t), newRuns(t)
	kr.signer("alice")
	mallory := kr.signer("mallory")
	p, mallorys := kr.policy(1, "alice"), kr.policy(1, "mallory")
	ctx := t.Context()
	d2 := approved(t, st, at(1, 0), map[string]string{"a": "2"}, mallory)
	if _, _, err := rs.admit(st, d2.String(), "job-88", mallorys); err != nil {
		t.Fatal(err)
	}
	o := runrecord.Options{URL: rs.url, RunID: "job-88"}
	if v, err := CheckPermit(ctx, st, o, d2, nil); !errors.Is(err, ErrNoPolicy) || !strings.Contains(err.Error(), "run job-88 was admitted by digest") {
		t.Fatalf("CheckPermit of job-88 without a policy = %+v, %v; want ErrNoPolicy naming the run", v, err)
	}
	if _, err := CheckPermit(ctx, st, o, d2, p); !errors.Is(err, ErrBadPermit) || !errors.Is(err, sign.ErrNotApproved) {
		t.Fatalf("CheckPermit of job-88 under alice's policy = %v; want not approved", err)
	}
	if _, _, err := rs.admit(st, d2.String(), "job-88", nil); !errors.Is(err, ErrNoPolicy) || !strings.Contains(err.Error(), "run job-88") {
		t.Fatalf("admit job-88 again without a policy = %v; want ErrNoPolicy", err)
	}
	if _, _, err := rs.admit(st, d2.String(), "job-88", p); err == nil || !strings.Contains(err.Error(), "run job-88 was admitted under trust policy "+mallorys.Digest().String()) {
		t.Fatalf("admit job-88 again under alice's policy = %v; want a refusal", err)
	}
}

// TestAdmitHeldUnderPolicyNow: admit NAME without a policy re-checks a
// held permit under the policy the gate keeps now, not the one kept at
// the permit's generation: once the gate moved to another policy, the run
// is refused, naming it; mount --require-permit (CheckPermit) still
// checks a gate permit under the policy its generation kept.
func TestAdmitHeldUnderPolicyNow(t *testing.T) {
	st, kr, rs := newLocal(t), newKeyring(t), newRuns(t)
	alice, bob := kr.signer("alice"), kr.signer("bob")
	p, bobs := kr.policy(1, "alice"), kr.policy(1, "bob")
	d1 := approved(t, st, at(1, 0), map[string]string{"a": "1"}, alice)
	activate(t, st, Activation{Gate: "prod", Digest: d1, Expect: -1, Policy: p})
	if _, _, err := rs.admit(st, "prod", "run-1", nil); err != nil {
		t.Fatal(err)
	}
	d3 := approved(t, st, at(1, 0), map[string]string{"a": "3"}, bob)
	activate(t, st, Activation{Gate: "prod", Digest: d3, Expect: 1, Policy: bobs})

	_, _, err := rs.admit(st, "prod", "run-1", nil)
	if err == nil || !strings.Contains(err.Error(), "run run-1 was admitted under trust policy "+p.Digest().String()+", not "+bobs.Digest().String()) {
		t.Fatalf("admit prod for run-1 after the gate moved to bob's policy = %v; want a refusal naming the run", err)
	}
	if held, _, err := rs.admit(st, "prod", "run-1", p); err != nil || held.Digest != d1 {
		t.Fatalf("admit prod for run-1 under --policy alice's = %+v, %v; want its permit for %s", held, err, d1)
	}
	if _, err := CheckPermit(t.Context(), st, runrecord.Options{URL: rs.url, RunID: "run-1"}, d1, nil); err != nil {
		t.Fatalf("CheckPermit of run-1 under the policy its generation kept: %v", err)
	}
}
