package admission

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

// runs is a local run record file.
type runs struct {
	t   testing.TB
	url string
}

func newRuns(t testing.TB) runs { return runs{t, filepath.Join(t.TempDir(), "runs.jsonl")} }

// admit runs Admit of target for purpose as run id.
func (r runs) admit(st store.Store, target, id string, p *sign.Policy) (runrecord.Permit, bool, error) {
	v, created, err := Admit(r.t.Context(), st, Request{Target: target, Purpose: purpose, Policy: p, Record: runrecord.Options{URL: r.url, RunID: id}})
	if err != nil {
		return runrecord.Permit{}, created, err
	}
	return v.Permit(), created, nil
}

// mount opens run id for digest d the way pinfs mount --require-permit
// does, and closes it again. It returns the permit the run holds.
func (r runs) mount(id string, d verify.Digest) (*runrecord.Permit, error) {
	rec, err := runrecord.Open(r.t.Context(), runrecord.Options{URL: r.url, RunID: id, Digest: d, RequirePermit: true})
	if err != nil {
		return nil, err
	}
	p := rec.Permit()
	return p, rec.Close(r.t.Context())
}

func TestAdmit(t *testing.T) {
	st, kr, rs := newLocal(t), newKeyring(t), newRuns(t)
	alice, bob := kr.signer("alice"), kr.signer("bob")
	p := kr.policy(1, "alice")
	ctx := t.Context()
	d1 := approved(t, st, at(1, 0), map[string]string{"a": "1", "b": "1"}, alice)
	activate(t, st, Activation{Gate: "support", Digest: d1, Expect: -1, Policy: p})

	// By alias: the gate resolved once, everything it decided on recorded.
	held, created, err := rs.admit(st, "support", "run-1", nil)
	if err != nil || !created {
		t.Fatalf("admit by alias: created %v, %v", created, err)
	}
	want := runrecord.Permit{RunID: "run-1", Digest: d1, Purpose: purpose, Gate: "support", Generation: 1,
		TombstoneWatermark: 1, BenchmarkFence: 0, Policy: p.Digest(), Approvals: []string{alice.KeyID()}, Time: held.Time}
	if held.Time.IsZero() || !samePermit(held, want) {
		t.Fatalf("permit %+v\nwant %+v", held, want)
	}
	got, err := rs.mount("run-1", d1)
	if err != nil || got == nil || !samePermit(*got, want) {
		t.Fatalf("mount of the admitted run: %+v, %v", got, err)
	}

	// Again for the same run: the held permit, nothing new.
	again, created, err := rs.admit(st, "support", "run-1", nil)
	if err != nil || created || !samePermit(again, want) {
		t.Fatalf("second admit: created %v, %+v, %v", created, again, err)
	}

	// By digest: no gate in the permit, the manifest's own watermarks, and
	// a policy must be given.
	if _, _, err := rs.admit(st, d1.String(), "run-d", nil); !errors.Is(err, ErrNoPolicy) {
		t.Fatalf("admit by digest without a policy: %v; want ErrNoPolicy", err)
	}
	byDigest, created, err := rs.admit(st, d1.String(), "run-d", p)
	if err != nil || !created || byDigest.Gate != "" || byDigest.Generation != 0 || byDigest.Digest != d1 ||
		byDigest.TombstoneWatermark != 1 || byDigest.Policy != p.Digest() || !slices.Equal(byDigest.Approvals, []string{alice.KeyID()}) {
		t.Fatalf("admit by digest: created %v, %+v, %v", created, byDigest, err)
	}

	// Refusals write nothing: the run holds no permit afterwards.
	unapproved := pinFiles(t, st, at(1, 0), map[string]string{"a": "u"})
	validate(t, st, unapproved)
	byBob := approved(t, st, at(1, 0), map[string]string{"a": "bob"}, bob)
	for _, tc := range []struct {
		name, target string
		purpose      string
		is           error
		want         string
	}{
		{"purpose", "support", "evaluation", nil, `is for purpose "training", not "evaluation"`},
		{"unapproved", unapproved.String(), purpose, sign.ErrNotApproved, unapproved.String()},
		{"approved by a key outside the policy", byBob.String(), purpose, sign.ErrNotApproved, "0 of 1"},
		{"no such gate", "nosuch", purpose, nil, "no such gate"},
		{"no such snapshot", verify.SHA256([]byte("x")).String(), purpose, nil, "no manifest " + verify.SHA256([]byte("x")).String() + " in store"},
	} {
		_, _, err := Admit(ctx, st, Request{Target: tc.target, Purpose: tc.purpose, Policy: p, Record: runrecord.Options{URL: rs.url, RunID: "run-x"}})
		if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %v saying %q", tc.name, err, tc.is, tc.want)
		}
		if _, err := rs.mount("run-x", d1); !errors.Is(err, runrecord.ErrNotPermitted) {
			t.Fatalf("%s: a refused admit left a permit: %v", tc.name, err)
		}
	}
	fence(t, st, FenceChange{Gate: "empty", Tombstone: 1})
	if _, _, err := rs.admit(st, "empty", "run-x", p); err == nil || !strings.Contains(err.Error(), "gate empty has no active snapshot") {
		t.Errorf("admit through a gate with no snapshot: %v", err)
	}
}

// samePermit reports whether a and b are the same permit.
func samePermit(a, b runrecord.Permit) bool {
	return a.Time.Equal(b.Time) && a.RunID == b.RunID && a.Digest == b.Digest && a.Purpose == b.Purpose && a.Gate == b.Gate && a.Generation == b.Generation &&
		a.TombstoneWatermark == b.TombstoneWatermark && a.BenchmarkFence == b.BenchmarkFence && a.Policy == b.Policy &&
		slices.Equal(a.Approvals, b.Approvals)
}

func TestAdmitAcrossGenerations(t *testing.T) {
	st, kr, rs := newLocal(t), newKeyring(t), newRuns(t)
	alice := kr.signer("alice")
	p := kr.policy(1, "alice")
	d1 := approved(t, st, at(1, 0), map[string]string{"a": "1"}, alice)
	d2 := approved(t, st, at(1, 0), map[string]string{"a": "2", "b": "2"}, alice)
	activate(t, st, Activation{Gate: "support", Digest: d1, Expect: -1, Policy: p})
	if _, _, err := rs.admit(st, "support", "run-1", nil); err != nil {
		t.Fatal(err)
	}

	// The alias moves on: the admitted run keeps d1 (admitting it again,
	// as a resumed job does, returns its permit); a new run gets d2.
	activate(t, st, Activation{Gate: "support", Digest: d2, Expect: 1})
	held, created, err := rs.admit(st, "support", "run-1", nil)
	if err != nil || created || held.Digest != d1 || held.Generation != 1 {
		t.Fatalf("admit run-1 after the alias moved: %+v, %v; want its permit for %s", held, err, d1)
	}
	if _, err := rs.mount("run-1", d2); !errors.Is(err, runrecord.ErrNotPermitted) || !strings.Contains(err.Error(), "permit is for "+d1.String()) {
		t.Fatalf("run-1 mounts %s: %v", d2, err)
	}
	p2, created, err := rs.admit(st, "support", "run-2", nil)
	if err != nil || !created || p2.Digest != d2 || p2.Generation != 2 {
		t.Fatalf("admit run-2: %+v, %v", p2, err)
	}

	// A fence moves the gate past d2 (and revokes one of its members):
	// admission through the gate stops, runs admitted before keep their
	// permits and digests.
	fence(t, st, FenceChange{Gate: "support", Tombstone: 2, Entries: []string{"b"}})
	_, _, err = rs.admit(st, "support", "run-3", nil)
	if !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), "built at tombstone watermark 1, gate support is at 2") {
		t.Fatalf("admit through a gate fenced past its snapshot: %v; want ErrFenced", err)
	}
	for id, d := range map[string]verify.Digest{"run-1": d1, "run-2": d2} {
		got, err := rs.mount(id, d)
		if err != nil || got == nil || got.Digest != d {
			t.Fatalf("%s admitted before the fence: mount %s: %+v, %v", id, d, got, err)
		}
	}

	// The snapshot at the new watermark without the revoked member admits.
	d3 := approved(t, st, at(2, 0), map[string]string{"a": "3"}, alice)
	activate(t, st, Activation{Gate: "support", Digest: d3, Expect: 3})
	if p3, _, err := rs.admit(st, "support", "run-3", nil); err != nil || p3.Digest != d3 || p3.Generation != 4 || p3.TombstoneWatermark != 2 {
		t.Fatalf("admit run-3 at generation 4: %+v, %v", p3, err)
	}
}
