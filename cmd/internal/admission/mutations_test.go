package admission

// Tests for the admission checks that issue 37's mutation audit found no
// test holding: each fails when its check is broken.

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
	"github.com/pinfs/pinfs/verify/sign"
)

// TestPlanHashingIdentityWrittenOut: a child member is inherited only when
// a trusted parent has its bucket, key, version, CAS blob, size and digest
// all alike (at any path); a change of any one of them alone makes it
// changed, and hashed. The plan expected is written out member by member.
func TestPlanHashingIdentityWrittenOut(t *testing.T) {
	t.Parallel()
	dg := func(s string) string { return b3.Of([]byte(s)).String() }
	s3 := func(path, bucket, key, version string, size int64, digest string) verify.Member {
		return verify.Member{ID: path, Path: path, Size: size, Digest: digest, S3: &verify.S3Source{Bucket: bucket, Key: key, VersionID: version}}
	}
	cas := func(path, blob string, size int64, digest string) verify.Member {
		return verify.Member{ID: path, Path: path, Size: size, Digest: digest, CAS: blob}
	}
	parent := verify.NewTable([]verify.Member{
		s3("a", "data", "ds/a", "v1", 5, dg("a")),
		s3("b", "data", "ds/b", "v1", 5, dg("b")),
		s3("c", "data", "ds/c", "v1", 5, dg("c")),
		s3("d", "data", "ds/d", "v1", 5, dg("d")),
		s3("e", "data", "ds/e", "v1", 5, dg("e")),
		s3("f", "data", "ds/f", "v1", 5, dg("f")),
		cas("g", dg("g"), 5, dg("g")),
		cas("h", dg("h"), 5, dg("h")),
	})
	const inherited, changed, isNew = "inherited", "changed", "new"
	child := []struct {
		m    verify.Member
		want string
	}{
		{s3("a", "data", "ds/a", "v1", 5, dg("a")), inherited},
		{s3("b", "data", "ds/b", "v2", 5, dg("b")), changed},  // only the S3 version
		{s3("c", "other", "ds/c", "v1", 5, dg("c")), changed}, // only the bucket
		{s3("d", "data", "ds/d2", "v1", 5, dg("d")), changed}, // only the key
		{s3("e", "data", "ds/e", "v1", 6, dg("e")), changed},  // only the size
		{s3("f", "data", "ds/f", "v1", 5, dg("F")), changed},  // only the digest
		{cas("g", dg("g"), 5, dg("g")), inherited},
		{cas("h", dg("H"), 5, dg("h")), changed},                     // only the CAS blob
		{s3("moved/a", "data", "ds/a", "v1", 5, dg("a")), inherited}, // a's identity at a new path
		{s3("z", "data", "ds/z", "v1", 5, dg("z")), isNew},
	}
	ms := make([]verify.Member, len(child))
	for i, c := range child {
		ms[i] = c.m
	}
	parents := []*verify.Checked{{Manifest: &verify.Manifest{SnapshotID: verify.SHA256([]byte("parent"))}, Table: parent}}
	trusted := func(int) error { return nil }
	for _, deep := range []bool{false, true} {
		var h Hashing
		hash, err := planHashing(t.Context(), verify.NewTable(ms), parents, deep, trusted, &h)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range child {
			if want := deep || c.want != inherited; hash[i] != want {
				t.Errorf("deep %v: %s (%s) hashed %v, want %v", deep, c.m.Path, c.want, hash[i], want)
			}
		}
		want := counts{hashed: 7, new: 1, changed: 6, inherited: 3}
		if deep {
			want.hashed = 10
		}
		if countsOf(&h) != want {
			t.Errorf("deep %v: %+v, want %+v", deep, countsOf(&h), want)
		}
	}
}

// TestValidateRehashesAnotherVersion: a child pins a.bin at a new S3
// version and claims for it the size and digest of the version its
// validated parent pinned; only the version differs, and the new
// version's bytes are not those. Validation re-reads a.bin instead of
// inheriting its digest, and fails naming it, with or without a policy.
func TestValidateRehashesAnotherVersion(t *testing.T) {
	fx, kr := newFixture(t), newKeyring(t)
	alice, p := kr.signer("alice"), kr.policy(1, "alice")
	a := fx.s3("a.bin", "", "ds/a.bin", "AAAA")
	b := fx.s3("b.bin", "", "ds/b.bin", "BBBB")
	parent := fx.pin([]verify.Member{a, b}, nil)
	fx.saved(parent, Options{})
	approve(t, fx.st, parent, alice)

	a2 := a
	a2.S3 = &verify.S3Source{Bucket: "data", Key: "ds/a.bin", VersionID: "v2"} // size and digest as at v-ds/a.bin
	fx.st.objects[store.Object{Bucket: "data", Key: "ds/a.bin", VersionID: "v2"}] = []byte("XXXX")
	child := fx.pin([]verify.Member{a2, b}, parentsOf(parent))
	for _, o := range []Options{{}, {Policy: p}} {
		r := fx.validate(child, nil, o)
		if h := r.Hashing; h == nil || !slices.Equal(h.Parents, []verify.Digest{parent}) ||
			countsOf(h) != (counts{hashed: 1, changed: 1, inherited: 1}) {
			t.Fatalf("policy %v: hashing %+v, want a.bin changed and hashed, b.bin inherited from the parent", o.Policy != nil, r.Hashing)
		}
		if f := failure(r, verify.KindMismatch); r.OK || f == nil || !slices.Equal(f.Members, []string{"a.bin"}) {
			t.Errorf("policy %v: ok %v, failures %+v; want a.bin's mismatch", o.Policy != nil, r.OK, r.Failures)
		}
	}
}

// v1Report saves what a validator before hashing wrote for d with members
// members (it only checked each member's HEAD): a passing pinfs.report.v1
// report, deep or not, with its VALIDATED marker.
func (fx *fixture) v1Report(d verify.Digest, members int, deep bool) {
	fx.t.Helper()
	r := &Report{Schema: reportSchemaV1, Manifest: d, OK: true, Failures: []Failure{}, Deep: deep,
		ValidatedAt: time.Now().UTC().Format(time.RFC3339Nano), Metrics: Metrics{Members: members}}
	if _, err := Save(fx.ctx, fx.st, r); err != nil {
		fx.t.Fatal(err)
	}
}

// TestV1ReportDoesNotVouchWithoutPolicy: validated without a policy, a
// child does not inherit from a parent whose only passing report is a v1
// report that was not deep (it hashed nothing): the parent is untrusted,
// saying so, and the child's member that carries a forged digest is
// hashed and fails. A deep v1 report does vouch.
func TestV1ReportDoesNotVouchWithoutPolicy(t *testing.T) {
	fx := newFixture(t)
	_, forged, ms := fx.forgedPins() // a.bin with b.bin's digest: a v1 validation passed it on HEAD alone
	fx.v1Report(forged, len(ms), false)
	child := fx.pin(append(ms, fx.s3("c.bin", "", "ds/c.bin", "CCCC")), parentsOf(forged))
	r := fx.validate(child, nil, Options{})
	h := r.Hashing
	if h == nil || len(h.Parents) != 0 || countsOf(h) != (counts{hashed: 3, new: 3}) {
		t.Fatalf("hashing %+v, want every member hashed, no parent inherited from", h)
	}
	if u := h.Untrusted; len(u) != 1 || u[0].Parent != forged || !strings.Contains(u[0].Reason, reportSchemaV1) {
		t.Errorf("untrusted %+v, want %s, validated only by a v1 report", u, forged)
	}
	if f := failure(r, verify.KindMismatch); r.OK || f == nil || !slices.Equal(f.Members, []string{"a.bin"}) {
		t.Errorf("ok %v, failures %+v; want a.bin's mismatch", r.OK, r.Failures)
	}

	// The control: a deep v1 report of a parent vouches for its digests.
	a, b := fx.s3("x", "", "ds/x", "xray"), fx.s3("y", "", "ds/y", "yankee")
	parent := fx.pin([]verify.Member{a, b}, nil)
	fx.v1Report(parent, 2, true)
	h = fx.validate(fx.pin([]verify.Member{a, b, fx.s3("z", "", "ds/z", "zulu")}, parentsOf(parent)), nil, Options{}).Hashing
	if !slices.Equal(h.Parents, []verify.Digest{parent}) || countsOf(h) != (counts{hashed: 1, new: 1, inherited: 2}) {
		t.Errorf("child of a parent with a deep v1 report: %+v, want x and y inherited", h)
	}
}

// TestValidateAndApproveSignsItsOwnReport: approve without --report
// validates the snapshot, and when that passes signs the report it just
// made, not the store's newest passing report of the snapshot, which a
// store writer planted (another manifest's report, renamed and dated
// later).
func TestValidateAndApproveSignsItsOwnReport(t *testing.T) {
	fx, kr := newFixture(t), newKeyring(t)
	alice := kr.signer("alice")
	d := fx.pin([]verify.Member{fx.s3("a.bin", "", "ds/a.bin", "AAAA")}, nil)
	other := fx.pin([]verify.Member{fx.s3("o.bin", "", "ds/o.bin", "OOOO")}, nil)
	planted := fx.forgedReport(fx.saved(other, Options{}), d)
	if ds, err := Validated(fx.ctx, fx.st, d); err != nil || len(ds) != 1 || ds[0] != planted {
		t.Fatalf("the store's passing reports of d: %v, %v; want the planted one alone", ds, err)
	}

	r, rd, env, err := ValidateAndApprove(fx.ctx, fx.st, d, nil, Options{}, alice, sign.Approval{Approver: "test"})
	if err != nil || !r.OK {
		t.Fatalf("approve: %+v, %v", r, err)
	}
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	own := verify.SHA256(b) // the report this validation made, by its bytes
	envelope, err := fx.st.Get(fx.ctx, approvalsPrefix(d)+env.Hex())
	if err != nil {
		t.Fatal(err)
	}
	sig, err := sign.Open(fx.ctx, envelope, alice.Public())
	if err != nil {
		t.Fatal(err)
	}
	if sig.Manifest != d || sig.Report != own || rd != own {
		t.Errorf("approve signed report %s (returned %s); want its own validation's %s, not the planted %s", sig.Report, rd, own, planted)
	}
	if ds, _ := Validated(fx.ctx, fx.st, d); len(ds) != 2 || ds[0] != planted {
		t.Errorf("the store's passing reports of d: %v; want the planted one newest, then approve's own", ds)
	}
}

// TestCheckPermitRefusesPermitOfAnotherRun: a real permit, granted to
// run-a, copied by a record writer into run-b's binding checks out in
// every other respect (gate, generation, digest, policy), but names
// run-a: CheckPermit (mount --require-permit) and Admit refuse it for
// run-b, naming both runs.
func TestCheckPermitRefusesPermitOfAnotherRun(t *testing.T) {
	st, kr, rs := newLocal(t), newKeyring(t), newRuns(t)
	alice := kr.signer("alice")
	p := kr.policy(1, "alice")
	ctx := t.Context()
	d := approved(t, st, at(1, 0), map[string]string{"a": "1"}, alice)
	activate(t, st, Activation{Gate: "prod", Digest: d, Expect: -1, Policy: p})
	if _, _, err := rs.admit(st, "prod", "run-a", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckPermit(ctx, st, runrecord.Options{URL: rs.url, RunID: "run-a"}, d, nil); err != nil {
		t.Fatalf("run-a's own permit: %v", err)
	}

	// Copy run-a's permit event as run-b's first line: the event's run id
	// comes before the permit's, which still names run-a.
	rec, err := os.ReadFile(rs.url)
	if err != nil {
		t.Fatal(err)
	}
	line, _, ok := strings.Cut(string(rec), "\n")
	if !ok || !strings.Contains(line, `"event":"permit"`) || strings.Count(line, `"run_id":"run-a"`) != 2 {
		t.Fatalf("run-a's permit line: %s", line)
	}
	line = strings.Replace(line, `"run_id":"run-a"`, `"run_id":"run-b"`, 1)
	f, err := os.OpenFile(rs.url, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	o := runrecord.Options{URL: rs.url, RunID: "run-b"}
	if held, err := runrecord.Held(ctx, o); err != nil || held == nil || held.RunID != "run-a" || held.Digest != d {
		t.Fatalf("run-b holds %+v, %v; want run-a's permit", held, err)
	}

	for _, pol := range []*sign.Policy{nil, p} {
		if v, err := CheckPermit(ctx, st, o, d, pol); !errors.Is(err, ErrBadPermit) || !strings.Contains(err.Error(), `run run-b's permit`) ||
			!strings.Contains(err.Error(), `it names run "run-a"`) {
			t.Errorf("CheckPermit of run-b holding run-a's permit (policy %v) = %+v, %v; want ErrBadPermit naming both runs", pol != nil, v, err)
		}
	}
	if v, _, err := Admit(ctx, st, Request{Target: "prod", Purpose: purpose, Record: o}); !errors.Is(err, ErrBadPermit) ||
		!strings.Contains(err.Error(), `it names run "run-a"`) {
		t.Errorf("Admit prod for run-b holding run-a's permit = %+v, %v; want ErrBadPermit", v, err)
	}
}
