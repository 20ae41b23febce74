package admission

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

// forgedReport stores what a store writer can: a copy of the passing
// report r of another manifest, made to name manifest d and to be the
// newest, with the marker that makes d VALIDATED. It returns its digest.
func (fx *fixture) forgedReport(r *Report, d verify.Digest) verify.Digest {
	fx.t.Helper()
	forged := *r
	forged.Manifest, forged.ValidatedAt = d, "2099-01-01T00:00:00Z"
	rd, err := Save(fx.ctx, fx.st, &forged)
	if err != nil {
		fx.t.Fatal(err)
	}
	return rd
}

// forgedPins pins a.bin and b.bin (d1), and d2 whose a.bin has b.bin's
// digest, as a re-pin over a forged digest-cache entry records it. It
// returns d2's members too.
func (fx *fixture) forgedPins() (d1, d2 verify.Digest, ms []verify.Member) {
	a := fx.s3("a.bin", "", "ds/a.bin", "AAAA")
	b := fx.s3("b.bin", "", "ds/b.bin", "BBBB")
	forged := a
	forged.Digest = b.Digest
	ms = []verify.Member{forged, b}
	return fx.pin([]verify.Member{a, b}, nil), fx.pin(ms, nil), ms
}

// refusedForged wants approve without a report (ValidateAndApprove) of d
// to validate it, fail naming a.bin's mismatch and sign nothing.
func (fx *fixture) refusedForged(d verify.Digest, s *sign.Signer, o Options) {
	fx.t.Helper()
	before, _ := Approvals(fx.ctx, fx.st, d)
	r, rd, env, err := ValidateAndApprove(fx.ctx, fx.st, d, nil, o, s, sign.Approval{Approver: "test"})
	if !errors.Is(err, ErrNotValidated) || env != "" || r == nil || rd == "" {
		fx.t.Fatalf("approve %s (policy %v): envelope %q, %v; want ErrNotValidated and no envelope", d, o.Policy != nil, env, err)
	}
	if f := failure(r, verify.KindMismatch); f == nil || !slices.Equal(f.Members, []string{"a.bin"}) {
		fx.t.Errorf("approve %s: failures %+v, want a.bin's mismatch", d, r.Failures)
	}
	if after, _ := Approvals(fx.ctx, fx.st, d); len(after) != len(before) {
		fx.t.Errorf("approve %s refused but stored %d approvals", d, len(after)-len(before))
	}
	if _, err := vouchingReport(fx.ctx, fx.st, d, rd, ""); !errors.Is(err, ErrBadReport) {
		fx.t.Errorf("the failing report %s of the approval's validation: %v, want it saved and failing", rd, err)
	}
}

// TestApproveIgnoresForgedNewestReport is the reviewer's reproduction: a
// store writer copies d1's passing report as d2's, newest, with its
// marker. d2 shows VALIDATED (a marker is a claim), but approve validates
// d2 itself, finds a.bin's forged digest and signs nothing.
func TestApproveIgnoresForgedNewestReport(t *testing.T) {
	fx, kr := newFixture(t), newKeyring(t)
	alice, p := kr.signer("alice"), kr.policy(1, "alice")
	d1, d2, _ := fx.forgedPins()
	fx.forgedReport(fx.saved(d1, Options{}), d2)
	if got := state(t, fx.st, d2, p); got != StateValidated {
		t.Fatalf("d2 with the forged report: %s, want VALIDATED (the claim)", got)
	}
	fx.refusedForged(d2, alice, Options{})
	fx.refusedForged(d2, alice, Options{Policy: p})
	if _, err := Approved(fx.ctx, fx.st, d2, p); !errors.Is(err, sign.ErrNotApproved) {
		t.Errorf("d2 approved: %v", err)
	}
}

// TestApprovedNeedsReportThatVouches is the reviewer's variant: a child of
// a parent whose passing report was forged, validated without a policy,
// inherits the forged digest on the store's word and passes; an approval
// of that report counts under no policy, so the child neither approves
// nor activates under one, and approving it under the policy (which
// validates with the policy in force) finds the forged digest.
func TestApprovedNeedsReportThatVouches(t *testing.T) {
	fx, kr := newFixture(t), newKeyring(t)
	alice, p := kr.signer("alice"), kr.policy(1, "alice")
	d1, parent, ms := fx.forgedPins()
	fx.forgedReport(fx.saved(d1, Options{}), parent)
	child := fx.pin(append(ms, fx.s3("c.bin", "", "ds/c.bin", "CCCC")), parentsOf(parent))

	r := fx.saved(child, Options{})
	if h := r.Hashing; h.Trust != TrustStore || h.Inherited != 2 || !r.Vouches("") || r.Vouches(p.Digest()) || !r.CountsUnderNoPolicy() {
		t.Fatalf("store-trust validation of the child: %+v, want 2 inherited on the store's word, vouching under no policy", h)
	}
	approve(t, fx.st, child, alice)
	_, err := Approved(fx.ctx, fx.st, child, p)
	if !errors.Is(err, sign.ErrNotApproved) || !strings.Contains(err.Error(), "on the store's word") {
		t.Fatalf("child approved by a report that inherited on the store's word: %v; want ErrNotApproved saying why", err)
	}
	if _, err := Activate(fx.ctx, fx.st, Activation{Gate: "prod", Digest: child, Expect: -1, Policy: p}); !errors.Is(err, sign.ErrNotApproved) {
		t.Errorf("alias set of the child: %v; want ErrNotApproved", err)
	}
	s, err := StatusOf(fx.ctx, fx.st, child, p)
	if err != nil || s.State != StateValidated || len(s.Signatures) != 1 || len(s.Signatures[0].Valid) != 0 {
		t.Errorf("status of the child: %+v, %v; want VALIDATED, alice's signature valid under no policy", s, err)
	}
	rd, _ := Validated(fx.ctx, fx.st, child)
	if _, _, err := Approve(fx.ctx, fx.st, child, alice, rd[0], p, sign.Approval{}); !errors.Is(err, ErrBadReport) {
		t.Errorf("approve --report of the store-trust report under the policy: %v; want ErrBadReport", err)
	}
	fx.refusedForged(child, alice, Options{Policy: p})
}
