package admission

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

func TestStatusLifecycle(t *testing.T) {
	st, kr := newLocal(t), newKeyring(t)
	alice, bob := kr.signer("alice"), kr.signer("bob")
	p := kr.policy(1, "alice")
	both := kr.policy(2, "alice", "bob")
	ctx := t.Context()
	status := func(d verify.Digest, p *sign.Policy) *Status {
		t.Helper()
		s, err := StatusOf(ctx, st, d, p)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	d := pinFiles(t, st, at(2, 1), map[string]string{"a": "alpha", "b": "be"})
	s := status(d, p)
	if s.State != StateBuilding || s.Digest != d || s.Purpose != purpose || s.Members != 2 || s.Bytes != 7 ||
		s.TombstoneWatermark != 2 || s.BenchmarkFence != 1 || len(s.Reports) != 0 || len(s.Signatures) != 0 || len(s.Aliases) != 0 {
		t.Fatalf("a fresh pin: %+v", s)
	}
	if len(s.Policies) != 1 || s.Policies[0].Approved || !strings.Contains(s.Policies[0].Reason, "no approvals recorded") {
		t.Errorf("policies of a fresh pin: %+v", s.Policies)
	}

	rd := validate(t, st, d)
	s = status(d, p)
	if s.State != StateValidated || len(s.Reports) != 1 || s.Reports[0].Digest != rd || s.Reports[0].ValidatedAt == "" || s.Reports[0].Deep {
		t.Fatalf("validated: %+v", s)
	}

	env := approve(t, st, d, alice)[0]
	// Without a policy nothing says whose key signed: still VALIDATED.
	s = status(d, nil)
	if s.State != StateValidated || len(s.Signatures) != 1 || s.Signatures[0].Envelope != env || s.Signatures[0].KeyID != "" ||
		len(s.Signatures[0].Valid) != 0 || len(s.Policies) != 0 {
		t.Fatalf("approved, no policy: %+v", s)
	}
	// Threshold 2 of alice and bob: one of two.
	s = status(d, both)
	if s.State != StateValidated || len(s.Policies) != 1 || s.Policies[0].Approved || !strings.Contains(s.Policies[0].Reason, "1 of 2") {
		t.Fatalf("approved by alice under {alice, bob} 2: %s %+v", s.State, s.Policies)
	}
	s = status(d, p)
	want := SignatureStatus{Envelope: env, KeyID: alice.KeyID(), Role: sign.DefaultRole, Approver: "test", Time: s.Signatures[0].Time,
		Report: rd, Valid: []verify.Digest{p.Digest()}}
	if s.State != StateApproved || len(s.Signatures) != 1 || !reflect.DeepEqual(s.Signatures[0], want) || s.Signatures[0].Time == "" {
		t.Fatalf("approved under {alice} 1: %s\n%+v\nwant %+v", s.State, s.Signatures, want)
	}
	if !reflect.DeepEqual(s.Policies, []PolicyStatus{{Policy: p.Digest(), From: "--policy", Approved: true}}) {
		t.Errorf("policies %+v", s.Policies)
	}

	approve(t, st, d, bob)
	if s = status(d, both); s.State != StateApproved || len(s.Signatures) != 2 {
		t.Fatalf("approved by both under {alice, bob} 2: %s, %d signatures", s.State, len(s.Signatures))
	}
	for _, sig := range s.Signatures {
		if !slices.Equal(sig.Valid, []verify.Digest{both.Digest()}) {
			t.Errorf("signature by %s valid under %v; want %s", sig.KeyID, sig.Valid, both.Digest())
		}
	}

	// ACTIVE, under the policy the gate keeps (no --policy needed).
	activate(t, st, Activation{Gate: "support", Digest: d, Expect: -1, Policy: p})
	s = status(d, nil)
	if s.State != StateActive || !reflect.DeepEqual(s.Aliases, []AliasRef{{Gate: "support", Generations: []int64{1}, Current: true}}) {
		t.Fatalf("active: %s %+v", s.State, s.Aliases)
	}
	if !reflect.DeepEqual(s.Policies, []PolicyStatus{{Policy: p.Digest(), From: "gate support", Approved: true}}) {
		t.Errorf("policies of an active snapshot: %+v", s.Policies)
	}
	if len(s.Signatures) != 2 {
		t.Fatalf("%d signatures", len(s.Signatures))
	}
	for _, sig := range s.Signatures {
		valid := []verify.Digest{}
		if sig.KeyID == alice.KeyID() {
			valid = []verify.Digest{p.Digest()}
		}
		if !slices.Equal(sig.Valid, valid) {
			t.Errorf("signature %s by %q valid under %v; want %v (bob is not in the gate's policy)", sig.Envelope, sig.KeyID, sig.Valid, valid)
		}
	}

	// Moved away and back: every generation is listed, and which is current.
	d2 := approved(t, st, at(2, 1), map[string]string{"a": "2"}, alice)
	activate(t, st, Activation{Gate: "support", Digest: d2, Expect: 1})
	if s = status(d, nil); s.State != StateActive || !reflect.DeepEqual(s.Aliases, []AliasRef{{Gate: "support", Generations: []int64{1}, Current: false}}) {
		t.Fatalf("after the alias moved on: %s %+v", s.State, s.Aliases)
	}
	fence(t, st, FenceChange{Gate: "other", Tombstone: 2})
	fence(t, st, FenceChange{Gate: "other", Benchmark: 1})
	activate(t, st, Activation{Gate: "other", Digest: d, Expect: 2, Policy: both})
	if _, err := Activate(ctx, st, Activation{Gate: "support", Digest: d, Expect: 2, Rollback: true}); err != nil {
		t.Fatal(err)
	}
	s = status(d, nil)
	wantAliases := []AliasRef{{Gate: "other", Generations: []int64{3}, Current: true}, {Gate: "support", Generations: []int64{1, 3}, Current: true}}
	if s.State != StateActive || !reflect.DeepEqual(s.Aliases, wantAliases) {
		t.Fatalf("after a rollback: %s %+v; want %+v", s.State, s.Aliases, wantAliases)
	}
	if len(s.Policies) != 2 || !s.Policies[0].Approved || !s.Policies[1].Approved {
		t.Errorf("policies of two gates: %+v", s.Policies)
	}
	if s2 := status(d2, nil); !reflect.DeepEqual(s2.Aliases, []AliasRef{{Gate: "support", Generations: []int64{2}, Current: false}}) {
		t.Errorf("%s: aliases %+v", d2, s2.Aliases)
	}
}

// TestStatusSignatureValidity: a signature is listed as valid under a
// policy only when it counts for that policy: not when the report it
// names was changed after signing, nor in a role the policy does not
// accept. Who signed is still shown.
func TestStatusSignatureValidity(t *testing.T) {
	st, kr := newLocal(t), newKeyring(t)
	alice := kr.signer("alice")
	p := kr.policy(1, "alice")
	ctx := t.Context()

	d := pinFiles(t, st, at(0, 0), map[string]string{"a": "alpha"})
	rd := validate(t, st, d)
	if _, _, err := Approve(ctx, st, d, alice, rd, nil, sign.Approval{Role: "intern"}); err != nil {
		t.Fatal(err)
	}
	roles := filepath.Join(kr.dir, "roles.json")
	if err := os.WriteFile(roles, []byte(`{"approvers": ["alice.pub"], "threshold": 1, "roles": ["data-owner"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	owners, err := sign.LoadPolicy(roles)
	if err != nil {
		t.Fatal(err)
	}
	s, err := StatusOf(ctx, st, d, owners)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != StateValidated || len(s.Signatures) != 1 || s.Signatures[0].KeyID != alice.KeyID() || s.Signatures[0].Role != "intern" || len(s.Signatures[0].Valid) != 0 {
		t.Errorf("an approval in a role the policy does not accept: %s %+v", s.State, s.Signatures)
	}

	d2 := pinFiles(t, st, at(0, 0), map[string]string{"b": "beta"})
	rd = validate(t, st, d2)
	approve(t, st, d2, alice)
	b, err := st.Get(ctx, ReportKey(rd))
	if err != nil {
		t.Fatal(err)
	}
	tamperFile(t, st.String(), ReportKey(rd), append(b, ' '))
	s, err = StatusOf(ctx, st, d2, p)
	if err != nil {
		t.Fatal(err)
	}
	if s.State == StateApproved || len(s.Signatures) != 1 || s.Signatures[0].KeyID != alice.KeyID() || len(s.Signatures[0].Valid) != 0 {
		t.Errorf("an approval of a report changed after signing: %s %+v", s.State, s.Signatures)
	}
}
