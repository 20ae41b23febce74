package admission

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// newVersion returns m at version v with content, which it puts in fx.
func (fx *fixture) newVersion(m verify.Member, v, content string) verify.Member {
	s3 := *m.S3
	s3.VersionID = v
	fx.st.objects[store.Object{Bucket: s3.Bucket, Key: s3.Key, VersionID: v}] = []byte(content)
	m.S3, m.Size, m.Digest = &s3, int64(len(content)), b3.Of([]byte(content)).String()
	return m
}

// saved validates d with o, requires it to pass, saves the report and
// returns it.
func (fx *fixture) saved(d verify.Digest, o Options) *Report {
	fx.t.Helper()
	r := fx.validate(d, nil, o)
	if !r.OK {
		fx.t.Fatalf("validate %s: %+v", d, r.Failures)
	}
	if _, err := Save(fx.ctx, fx.st, r); err != nil {
		fx.t.Fatal(err)
	}
	return r
}

// counts is the part of Hashing the tests compare.
type counts struct{ hashed, new, changed, inherited int }

func countsOf(h *Hashing) counts { return counts{h.Hashed, h.New, h.Changed, h.Inherited} }

func parentsOf(m ...verify.Digest) func(*verify.Manifest) {
	return func(mf *verify.Manifest) { mf.Parents = m }
}

// TestValidateHashesForgedDigest is issue 22's reproduction: a re-pin took
// a.bin's digest from a forged digest-cache entry (b.bin's digest at
// a.bin's version). However the parent stands, validation without --deep
// re-reads a.bin and fails naming it.
func TestValidateHashesForgedDigest(t *testing.T) {
	fx := newFixture(t)
	kr := newKeyring(t)
	alice := kr.signer("alice")
	p := kr.policy(1, "alice")
	a := fx.s3("a.bin", "", "ds/a.bin", "AAAA")
	b := fx.s3("b.bin", "", "ds/b.bin", "BBBB")
	forged := a
	forged.Digest = b.Digest
	parent := fx.pin([]verify.Member{a, b}, nil)

	for _, tc := range []struct {
		name    string
		prepare func()
		o       Options
	}{
		{"parent neither validated nor approved", func() {}, Options{}},
		{"parent validated", func() { fx.saved(parent, Options{}) }, Options{}},
		{"parent approved under the policy in force", func() { approve(t, fx.st, parent, alice) }, Options{Policy: p}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.prepare()
			for name, d := range map[string]verify.Digest{
				"with the parent":    fx.pin([]verify.Member{forged, b}, parentsOf(parent)),
				"without the parent": fx.pin([]verify.Member{forged, b}, nil),
			} {
				r := fx.validate(d, nil, tc.o)
				f := failure(r, verify.KindMismatch)
				if r.OK || f == nil || !slices.Contains(f.Members, "a.bin") || f.Count != 1 || !strings.Contains(f.Detail, "a.bin") {
					t.Fatalf("%s: the forged digest of a.bin passed validation: ok %v, failures %+v", name, r.OK, r.Failures)
				}
			}
		})
	}
}

// TestValidateInheritsOnlyFromTrustedParents: a member is hashed unless a
// trusted parent has its object, version, size and digest; the report
// counts why.
func TestValidateInheritsOnlyFromTrustedParents(t *testing.T) {
	fx := newFixture(t)
	kr := newKeyring(t)
	alice, bob := kr.signer("alice"), kr.signer("bob")
	p, bobs := kr.policy(1, "alice"), kr.policy(1, "bob")
	a := fx.s3("a", "", "ds/a", "alpha")
	b := fx.s3("b", "", "ds/b", "bravo")
	c := fx.s3("c", "", "ds/c", "charlie")
	parent := fx.pin([]verify.Member{a, b, c}, nil)
	// The child: a and c unchanged, b at a new version, d new.
	child := fx.pin([]verify.Member{a, fx.newVersion(b, "v2", "BRAVO!"), c, fx.s3("d", "", "ds/d", "delta")}, parentsOf(parent))
	// c's pinned bytes change behind the store's back (same size): only
	// a member that is hashed can notice.
	fx.st.objects[store.Object{Bucket: "data", Key: "ds/c", VersionID: "v-ds/c"}] = []byte("CHARLIE")

	wantOf := func(d verify.Digest, what string, o Options, trust string, pd verify.Digest, parents []verify.Digest, w counts) *Report {
		t.Helper()
		r := fx.validate(d, nil, o)
		h := r.Hashing
		if h == nil || countsOf(h) != w || h.Trust != trust || h.Policy != pd || !slices.Equal(h.Parents, parents) {
			t.Fatalf("%s: hashing %+v, want %s %q from %v and %+v", what, h, trust, pd, parents, w)
		}
		return r
	}
	want := func(what string, o Options, trust string, pd verify.Digest, parents []verify.Digest, w counts) *Report {
		t.Helper()
		return wantOf(child, what, o, trust, pd, parents, w)
	}
	all := counts{hashed: 4, new: 4}

	// No report of the parent: everything is hashed, and c fails.
	r := want("parent BUILDING", Options{}, TrustStore, "", []verify.Digest{}, all)
	if f := failure(r, verify.KindMismatch); f == nil || !slices.Equal(f.Members, []string{"c"}) {
		t.Errorf("parent BUILDING: failures %+v, want c's mismatch", r.Failures)
	}
	if u := r.Hashing.Untrusted; len(u) != 1 || u[0].Parent != parent || u[0].Reason != "not VALIDATED" {
		t.Errorf("untrusted %+v, want the parent, not VALIDATED", u)
	}

	// The first validation of the parent hashes every member (c is still
	// right then) and vouches for them.
	fx.st.objects[store.Object{Bucket: "data", Key: "ds/c", VersionID: "v-ds/c"}] = []byte("charlie")
	if h := fx.saved(parent, Options{}).Hashing; countsOf(h) != (counts{hashed: 3, new: 3}) {
		t.Fatalf("first validation of the parent: %+v", h)
	}
	fx.st.objects[store.Object{Bucket: "data", Key: "ds/c", VersionID: "v-ds/c"}] = []byte("CHARLIE")

	// Without a policy, a passing report of the parent in the store is
	// trusted: a and c are inherited (c's HEAD still passes), b and d
	// hashed. --deep hashes all and finds c.
	inherit := counts{hashed: 2, new: 1, changed: 1, inherited: 2}
	if r := want("parent VALIDATED", Options{}, TrustStore, "", []verify.Digest{parent}, inherit); !r.OK || r.Metrics.VersionsChecked != 4 {
		t.Errorf("parent VALIDATED: ok %v, %d versions checked: %+v", r.OK, r.Metrics.VersionsChecked, r.Failures)
	}
	deep := inherit
	deep.hashed = 4
	if r := want("--deep", Options{Deep: true}, TrustStore, "", []verify.Digest{parent}, deep); failure(r, verify.KindMismatch) == nil {
		t.Errorf("--deep: c's mismatch not found: %+v", r.Failures)
	}

	// Under a policy only an approval under it counts.
	want("policy, parent not approved", Options{Policy: p}, TrustPolicy, p.Digest(), []verify.Digest{}, all)
	approve(t, fx.st, parent, alice)
	want("policy, parent approved", Options{Policy: p}, TrustPolicy, p.Digest(), []verify.Digest{parent}, inherit)
	r = want("another policy", Options{Policy: bobs}, TrustPolicy, bobs.Digest(), []verify.Digest{}, all)
	if u := r.Hashing.Untrusted; len(u) != 1 || !strings.Contains(u[0].Reason, "approv") {
		t.Errorf("untrusted %+v, want the parent, not approved", u)
	}

	// By induction: a snapshot whose report inherited without a policy
	// does not vouch under one, even approved; it does once its report
	// inherited under that policy.
	fx.st.objects[store.Object{Bucket: "data", Key: "ds/c", VersionID: "v-ds/c"}] = []byte("charlie")
	grand := fx.pin([]verify.Member{a, b, c, fx.s3("e", "", "ds/e", "echo")}, parentsOf(child))
	fx.saved(child, Options{}) // inherits a and c from the parent by the store's word
	approve(t, fx.st, child, bob)
	wantOf(grand, "approved by a report that inherited without the policy", Options{Policy: bobs}, TrustPolicy, bobs.Digest(),
		[]verify.Digest{}, counts{hashed: 4, new: 4})
	fx.saved(child, Options{Policy: bobs}) // hashes a, b, c and d: the parent is not approved under bobs
	approve(t, fx.st, child, bob)
	wantOf(grand, "approved by a report that hashed everything", Options{Policy: bobs}, TrustPolicy, bobs.Digest(),
		[]verify.Digest{child}, counts{hashed: 2, new: 1, changed: 1, inherited: 2})
}

// TestReportVouches: which reports make a parent's digests facts.
func TestReportVouches(t *testing.T) {
	pd, other := verify.SHA256([]byte("p")), verify.SHA256([]byte("q"))
	for _, tc := range []struct {
		name     string
		r        Report
		none, pd bool // vouches without a policy, under pd
	}{
		{"v1", Report{OK: true, Metrics: Metrics{Members: 2}}, false, false},
		{"v1 deep", Report{OK: true, Deep: true}, true, true},
		{"failed", Report{Hashing: &Hashing{Trust: TrustStore, Hashed: 2}, Metrics: Metrics{Members: 2}}, false, false},
		{"hashed all", Report{OK: true, Hashing: &Hashing{Trust: TrustStore, Hashed: 2}, Metrics: Metrics{Members: 2}}, true, true},
		{"inherited, no policy", Report{OK: true, Hashing: &Hashing{Trust: TrustStore, Hashed: 1, Inherited: 1}, Metrics: Metrics{Members: 2}}, true, false},
		{"inherited under pd", Report{OK: true, Hashing: &Hashing{Trust: TrustPolicy, Policy: pd, Hashed: 1, Inherited: 1}, Metrics: Metrics{Members: 2}}, true, true},
		{"inherited under another", Report{OK: true, Hashing: &Hashing{Trust: TrustPolicy, Policy: other, Inherited: 2}, Metrics: Metrics{Members: 2}}, true, false},
	} {
		if got := [2]bool{tc.r.Vouches(""), tc.r.Vouches(pd)}; got != [2]bool{tc.none, tc.pd} {
			t.Errorf("%s: vouches %v without a policy and under pd, want %v", tc.name, got, [2]bool{tc.none, tc.pd})
		}
	}
}

// TestV1ReportsStillLoad: a report written before hashing (v1) still
// counts for approval, but vouches for no digest unless deep; a v2 report
// must say what it hashed.
func TestV1ReportsStillLoad(t *testing.T) {
	fx := newFixture(t)
	d := fx.pin([]verify.Member{fx.cas("a", "", "a")}, nil)
	r := fx.validate(d, nil, Options{})
	v2 := *r
	r.Schema, r.Hashing = reportSchemaV1, nil
	rd, err := Save(fx.ctx, fx.st, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vouchingReport(fx.ctx, fx.st, d, rd, ""); err != nil {
		t.Fatalf("a passing v1 report: %v", err)
	}
	if got, err := LoadReport(fx.ctx, fx.st, rd); err != nil || got.Vouches("") {
		t.Errorf("v1 report: %v, vouches %v; want it loaded, vouching for nothing", err, got != nil && got.Vouches(""))
	}
	v2.Hashing = nil
	if rd, err = Save(fx.ctx, fx.st, &v2); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadReport(fx.ctx, fx.st, rd); !errors.Is(err, ErrBadReport) || !strings.Contains(err.Error(), "with hashing false") {
		t.Errorf("v2 report without hashing: %v, want ErrBadReport", err)
	}
}
