package admission

import (
	"errors"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

func TestApproveNeedsValidated(t *testing.T) {
	st, kr := newLocal(t), newKeyring(t)
	alice := kr.signer("alice")
	ctx := t.Context()
	files := map[string]string{"train/a": "alpha", "train/b": "beta"}
	d := pinFiles(t, st, at(0, 0), files)
	noApprovals := func(what string) {
		t.Helper()
		if envs, err := Approvals(ctx, st, d); err != nil || len(envs) != 0 {
			t.Fatalf("%s: %d approvals stored, %v; want none", what, len(envs), err)
		}
	}

	// BUILDING: no report at all.
	if _, _, err := Approve(ctx, st, d, alice, "", nil, sign.Approval{}); !errors.Is(err, ErrNotValidated) {
		t.Fatalf("approve without a report: %v; want ErrNotValidated", err)
	}
	noApprovals("no report")

	// A failing report (a revoked member) is saved but never approvable.
	r, err := Validate(ctx, st, d, &Fences{Gate: "g", Revoked: map[string]bool{"train/b": true}}, Options{})
	if err != nil || r.OK {
		t.Fatalf("validate with train/b revoked: ok %v, %v", r.OK, err)
	}
	failed, err := Save(ctx, st, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, rd := range []verify.Digest{"", failed} {
		_, _, err := Approve(ctx, st, d, alice, rd, nil, sign.Approval{})
		if !errors.Is(err, ErrNotValidated) {
			t.Fatalf("approve with report %q of a failed validation: %v; want ErrNotValidated", rd, err)
		}
	}
	if _, _, err := Approve(ctx, st, d, alice, failed, nil, sign.Approval{}); !errors.Is(err, ErrBadReport) || !strings.Contains(err.Error(), "failed") {
		t.Errorf("approve with a failing report: %v; want ErrBadReport saying it failed", err)
	}
	noApprovals("failing report")

	// A passing report of another manifest does not validate d.
	other := pinFiles(t, st, at(0, 0), map[string]string{"x": "x"})
	otherReport := validate(t, st, other)
	_, _, err = Approve(ctx, st, d, alice, otherReport, nil, sign.Approval{})
	if !errors.Is(err, ErrNotValidated) || !strings.Contains(err.Error(), "is about manifest "+other.String()) {
		t.Fatalf("approve with the report of %s: %v; want ErrNotValidated naming it", other, err)
	}
	noApprovals("report of another manifest")

	// A manifest that is not in the store.
	gone := verify.SHA256([]byte("no such manifest"))
	if _, _, err := Approve(ctx, st, gone, alice, "", nil, sign.Approval{}); err == nil || !strings.Contains(err.Error(), "no manifest "+gone.String()+" in store") {
		t.Errorf("approve a missing manifest: %v", err)
	}
}

func TestApproveStoresEnvelope(t *testing.T) {
	st, kr := newLocal(t), newKeyring(t)
	alice, bob, carol := kr.signer("alice"), kr.signer("bob"), kr.signer("carol")
	ctx := t.Context()
	d := pinFiles(t, st, at(0, 0), map[string]string{"a": "alpha"})
	rd := validate(t, st, d)

	env, got, err := Approve(ctx, st, d, alice, rd, nil, sign.Approval{Role: "data-owner", Approver: "alice@example"})
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Manifest != d || !got.OK {
		t.Errorf("approved with report %+v; want the passing report %s of %s", got, rd, d)
	}
	key := "admission/sha256/" + d.Hex() + "/approvals/" + env.Hex()
	b, err := st.Get(ctx, key)
	if err != nil {
		t.Fatalf("the envelope is not at %s: %v", key, err)
	}
	if verify.SHA256(b) != env {
		t.Fatalf("%s holds bytes of digest %s", key, verify.SHA256(b))
	}
	sig, err := sign.Open(ctx, b, alice.Public())
	if err != nil {
		t.Fatal(err)
	}
	if sig.Manifest != d || sig.Report != rd || sig.KeyID != alice.KeyID() ||
		sig.Approval.Role != "data-owner" || sig.Approval.Approver != "alice@example" || sig.Approval.Time.IsZero() {
		t.Errorf("the envelope says %+v", sig)
	}
	if _, err := verify.Fetch(ctx, st, d); err != nil {
		t.Errorf("the manifest no longer verifies after approval: %v", err)
	}

	// Threshold 1: alice suffices; a key outside the policy does not.
	sigs, err := Approved(ctx, st, d, kr.policy(1, "alice"))
	if err != nil || len(sigs) != 1 || sigs[0].KeyID != alice.KeyID() {
		t.Fatalf("approved under {alice} 1: %+v, %v", sigs, err)
	}
	if _, err := Approved(ctx, st, d, kr.policy(1, "carol")); !errors.Is(err, sign.ErrNotApproved) {
		t.Errorf("approved under {carol} by alice only: %v; want ErrNotApproved", err)
	}

	// Threshold 2 counts distinct keys: alice signing twice is still one.
	both := kr.policy(2, "alice", "bob")
	approve(t, st, d, alice)
	if envs, _ := Approvals(ctx, st, d); len(envs) != 2 {
		t.Fatalf("%d envelopes stored; want 2 (alice twice)", len(envs))
	}
	if _, err := Approved(ctx, st, d, both); !errors.Is(err, sign.ErrNotApproved) || !strings.Contains(err.Error(), "1 of 2") {
		t.Fatalf("approved under {alice, bob} 2 by alice twice: %v; want ErrNotApproved, 1 of 2", err)
	}
	approve(t, st, d, carol)
	if _, err := Approved(ctx, st, d, both); !errors.Is(err, sign.ErrNotApproved) {
		t.Fatalf("approved under {alice, bob} 2 by alice and carol: %v; want ErrNotApproved", err)
	}
	approve(t, st, d, bob)
	sigs, err = Approved(ctx, st, d, both)
	if err != nil || len(sigs) != 2 {
		t.Fatalf("approved under {alice, bob} 2 by both: %d signatures, %v", len(sigs), err)
	}
	if ids := []string{sigs[0].KeyID, sigs[1].KeyID}; !(ids[0] != ids[1] && (ids[0] == alice.KeyID() || ids[0] == bob.KeyID()) &&
		(ids[1] == alice.KeyID() || ids[1] == bob.KeyID())) {
		t.Errorf("counted keys %v; want alice and bob", ids)
	}

	// An approval of another manifest is stored under its own manifest and
	// never counts for d.
	other := approved(t, st, at(0, 0), map[string]string{"b": "beta"}, carol)
	if _, err := Approved(ctx, st, d, kr.policy(1, "carol")); err != nil {
		t.Fatalf("carol approved d: %v", err)
	}
	if _, err := Approved(ctx, st, other, kr.policy(1, "alice")); !errors.Is(err, sign.ErrNotApproved) {
		t.Errorf("%s approved by alice's approvals of %s: %v", other, d, err)
	}
}

func TestApproveTampered(t *testing.T) {
	st, kr := newLocal(t), newKeyring(t)
	alice := kr.signer("alice")
	p := kr.policy(1, "alice")
	ctx := t.Context()

	// A report changed after signing: its bytes no longer hash to the digest
	// the signature names, so the approval no longer counts.
	d := pinFiles(t, st, at(0, 0), map[string]string{"a": "alpha"})
	rd := validate(t, st, d)
	approve(t, st, d, alice)
	if _, err := Approved(ctx, st, d, p); err != nil {
		t.Fatal(err)
	}
	b, err := st.Get(ctx, ReportKey(rd))
	if err != nil {
		t.Fatal(err)
	}
	tamperFile(t, st.String(), ReportKey(rd), []byte(strings.Replace(string(b), `"members":1`, `"members":2`, 1)))
	if _, err := Approved(ctx, st, d, p); !errors.Is(err, sign.ErrNotApproved) || !strings.Contains(err.Error(), rd.String()) {
		t.Fatalf("approved with a tampered report: %v; want ErrNotApproved naming report %s", err, rd)
	}
	if _, err := Activate(ctx, st, Activation{Gate: "g", Digest: d, Expect: -1, Policy: p}); !errors.Is(err, sign.ErrNotApproved) {
		t.Errorf("activate with a tampered report: %v; want ErrNotApproved", err)
	}

	// A manifest changed after signing fails to fetch: nothing reads it.
	d2 := approved(t, st, at(0, 0), map[string]string{"b": "beta"}, alice)
	if _, err := Approved(ctx, st, d2, p); err != nil {
		t.Fatal(err)
	}
	mb, err := st.Get(ctx, verify.ManifestKey(d2))
	if err != nil {
		t.Fatal(err)
	}
	tamperFile(t, st.String(), verify.ManifestKey(d2), []byte(strings.Replace(string(mb), purpose, "evaluation", 1)))
	if _, err := verify.Fetch(ctx, st, d2); err == nil {
		t.Fatal("a tampered manifest fetches")
	}
	if _, _, err := Approve(ctx, st, d2, alice, "", nil, sign.Approval{}); err == nil {
		t.Error("approve of a tampered manifest succeeded")
	}
	if _, err := Activate(ctx, st, Activation{Gate: "g", Digest: d2, Expect: -1, Policy: p}); err == nil {
		t.Error("activate of a tampered manifest succeeded")
	}
	if _, err := StatusOf(ctx, st, d2, p); err == nil {
		t.Error("status of a tampered manifest succeeded")
	}

	// An envelope whose bytes were replaced no longer matches its key and
	// is not even offered to the policy.
	d3 := approved(t, st, at(0, 0), map[string]string{"c": "gamma"}, alice)
	envs, err := Approvals(ctx, st, d3)
	if err != nil || len(envs) != 1 {
		t.Fatalf("%d approvals, %v", len(envs), err)
	}
	key := "admission/sha256/" + d3.Hex() + "/approvals/" + verify.SHA256(envs[0]).Hex()
	tamperFile(t, st.String(), key, append(envs[0], ' '))
	if envs, err := Approvals(ctx, st, d3); err != nil || len(envs) != 0 {
		t.Errorf("a changed envelope is still offered: %d, %v", len(envs), err)
	}
	if _, err := Approved(ctx, st, d3, p); !errors.Is(err, sign.ErrNotApproved) {
		t.Errorf("approved by a changed envelope: %v", err)
	}
}
