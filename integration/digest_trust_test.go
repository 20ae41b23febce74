package integration

// Issue 22, item 2: a digest a pin takes from the digest cache
// (store/versions) or from a shard's partial table is a claim of whoever
// wrote the store; pinfs validate is where it becomes a fact. Through the
// pinfs binary, with an S3 source on versitygw and the store in a local
// directory or in S3.

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/integration/s3test"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/dial"
	digestcache "github.com/pinfs/pinfs/store/versions"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
	"github.com/pinfs/pinfs/verify/jcs"
)

// forgeStore is what someone with write access to a store can do to it.
type forgeStore interface {
	store.Store
	store.Swapper
}

// trustStore is an S3 source s3://data/ds/ and a store (URL and the same
// store opened in this process, to forge in).
type trustStore struct {
	s     *s3test.Server
	env   []string
	store string
	st    forgeStore
}

// eachTrustStore runs f with a fresh source and a store in a local
// directory, then in S3. It opens the store as the commands do, from this
// process's environment (s3test.UseEnv, t.Setenv), so the tests that use it
// are the integration tests that do not run in parallel with the others.
func eachTrustStore(t *testing.T, f func(t *testing.T, ts *trustStore)) {
	for _, kind := range []string{"local", "s3"} {
		t.Run(kind, func(t *testing.T) {
			s := s3test.Start(t)
			s.CreateBucket(t, "data", true)
			s.CreateBucket(t, "store", true)
			s.UseEnv(t)
			ts := &trustStore{s: s, env: s.Env(), store: "s3://store/pinfs"}
			if kind == "local" {
				ts.store = filepath.Join(t.TempDir(), "store")
			}
			st, err := dial.Open(t.Context(), ts.store)
			if err != nil {
				t.Fatal(err)
			}
			ts.st = st.(forgeStore)
			f(t, ts)
		})
	}
}

// member returns the member at path of snapshot d.
func (ts *trustStore) member(t *testing.T, d, path string) verify.Member {
	t.Helper()
	c, err := verify.Fetch(t.Context(), ts.st, verify.Digest(d))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Table.Members() {
		if m.Path == path {
			return m
		}
	}
	t.Fatalf("%s has no member %s", d, path)
	return verify.Member{}
}

// forgedRepin pins a.bin (AAAA) and b.bin (BBBB) from the source (d1),
// forges one digest-cache entry, a.bin at its version with b.bin's
// digest, and re-pins (d2): the re-pin reuses it and reads nothing.
func (ts *trustStore) forgedRepin(t *testing.T) (d1, d2 string) {
	t.Helper()
	ts.s.Put(t, "data", "ds/a.bin", []byte("AAAA"))
	ts.s.Put(t, "data", "ds/b.bin", []byte("BBBB"))
	d1, c := incrementalPin(t, ts.env, "s3://data/ds/", "--store", ts.store)
	if c.read != 2 {
		t.Fatalf("first pin: %v, want 2 read", c)
	}
	a := ts.member(t, d1, "a.bin")
	forged := digestcache.Entry{Key: a.S3.Key, VersionID: a.S3.VersionID, Size: a.Size, Digest: b3.Of([]byte("BBBB"))}
	if err := digestcache.Open(ts.st, "data", "ds/").Record(t.Context(), []digestcache.Entry{forged}, nil); err != nil {
		t.Fatal(err)
	}
	d2, c = incrementalPin(t, ts.env, "s3://data/ds/", "--store", ts.store)
	if c.reused != 2 || c.read != 0 || ts.member(t, d2, "a.bin").Digest != forged.Digest.String() {
		t.Fatalf("re-pin over the forged entry: %v, want 2 reused, 0 read and the forged digest recorded", c)
	}
	return d1, d2
}

// hashingOf runs pinfs validate --json with args and returns the counts of
// its report's hashing and its trusted parents.
func hashingOf(t *testing.T, env []string, code int, args ...string) (counts [4]float64, trust string, parents []string) {
	t.Helper()
	rep, r := reportOf(t, env, code, args...)
	if rep["schema"] != "pinfs.report.v2" {
		t.Fatalf("validate %v: schema %v, want pinfs.report.v2", args, rep["schema"])
	}
	h, _ := rep["hashing"].(map[string]any)
	if h == nil {
		t.Fatalf("validate %v: no hashing in the report:\n%v", args, r)
	}
	for i, k := range []string{"hashed", "new", "changed", "inherited"} {
		counts[i], _ = h[k].(float64)
	}
	for _, p := range h["parents"].([]any) {
		parents = append(parents, p.(string))
	}
	trust, _ = h["trust"].(string)
	return counts, trust, parents
}

// TestValidateHashesWhatNoApprovedParentVouchesFor: a clean re-pin of an
// approved parent has only its new and changed members hashed; a digest
// forged into the digest cache, or into a shard's partial table, makes the
// pin record it without reading, and validate then fails naming the
// member, so the snapshot can never be approved.
func TestValidateHashesWhatNoApprovedParentVouchesFor(t *testing.T) {
	eachTrustStore(t, func(t *testing.T, ts *trustStore) {
		ctx, env, st := t.Context(), ts.env, ts.store
		d1, d2 := ts.forgedRepin(t)
		a := ts.member(t, d1, "a.bin")
		keys := newSigners(t)
		forgedFails(t, env, d2, st, keys, nil)

		// d1 validated (every member hashed) and approved; the gate keeps
		// the policy. The forged pin fails under it too.
		if n, trust, _ := hashingOf(t, env, 0, d1, "--store", st, "--policy", keys.policy); n != [4]float64{2, 2, 0, 0} || trust != "policy" {
			t.Fatalf("first validation: hashed/new/changed/inherited %v under %s, want 2 new members hashed under the policy", n, trust)
		}
		mustPinfs(t, env, "approve", d1, "--store", st, "--key", keys.aliceKey)
		mustPinfs(t, env, "alias", "set", "prod", d1, "--store", st, "--policy", keys.policy)
		forgedFails(t, env, d2, st, keys, []string{"--policy", keys.policy}, []string{"--alias", "prod"})

		// A clean incremental re-pin of the approved parent: b.bin changed,
		// c.bin new; only those two are hashed, by --policy or by the
		// policy the gate keeps, and without a policy by d1's own report.
		ts.s.Put(t, "data", "ds/b.bin", []byte("bbbb, a new version"))
		ts.s.Put(t, "data", "ds/c.bin", []byte("CCCC"))
		d3, c := incrementalPin(t, env, "s3://data/ds/", "--store", st, "--parent", d1)
		if c.reused != 1 || c.read != 2 {
			t.Fatalf("re-pin with one change and one addition: %v, want 1 reused and 2 read", c)
		}
		for _, by := range []struct {
			trust string
			flags []string
		}{{"policy", []string{"--policy", keys.policy}}, {"policy", []string{"--alias", "prod"}}, {"store", nil}} {
			n, trust, parents := hashingOf(t, env, 0, append([]string{d3, "--store", st}, by.flags...)...)
			if n != [4]float64{2, 1, 1, 1} || trust != by.trust || !slices.Equal(parents, []string{d1}) {
				t.Errorf("validate %v of the re-pin: hashed/new/changed/inherited %v under %s from %v; want 2/1/1/1 under %s from %s",
					by.flags, n, trust, parents, by.trust, d1)
			}
		}
		wantExit(t, env, 0, []string{"hashed 2 of 3 members: 1 new, 1 changed, 1 inherited", "trusted parent " + d1},
			"validate", d3, "--store", st, "--policy", keys.policy)
		wantExit(t, env, 0, []string{"hashed 3 of 3 members: 1 new, 1 changed, 1 inherited"},
			"validate", d3, "--store", st, "--policy", keys.policy, "--deep")

		// A forged partial table: the merge takes its digests unread.
		plan := filepath.Join(t.TempDir(), "plan.json")
		pd := mustPinfs(t, env, "pin", "s3://data/ds/", "--store", st, "--plan", plan, "--shards", "1").lastLine()
		mustPinfs(t, env, "pin", "--plan", plan, "--shard", "0", "--store", st, "--rehash")
		key := "shards/sha256/" + hexOf(pd) + "/0"
		b, rev, err := ts.st.Load(ctx, key)
		if err != nil {
			t.Fatalf("the shard's partial table: %v", err)
		}
		bucket, es, err := digestcache.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		for i := range es {
			if es[i].Key == a.S3.Key {
				es[i].Digest = b3.Of([]byte("CCCC"))
			}
		}
		if b, err = digestcache.Encode(bucket, es); err != nil {
			t.Fatal(err)
		}
		if err := ts.st.Swap(ctx, key, b, rev); err != nil {
			t.Fatal(err)
		}
		r := mustPinfs(t, env, "pin", "--plan", plan, "--merge", "--store", st)
		md := r.lastLine()
		if !strings.Contains(r.stderr, "3 members: 3 reused, 0 read") || ts.member(t, md, "a.bin").Digest != b3.Of([]byte("CCCC")).String() {
			t.Fatalf("merge of the forged partial table: want 3 reused, 0 read and the forged digest recorded:\n%v", r)
		}
		forgedFails(t, env, md, st, keys, []string{"--alias", "prod"})
	})
}

// forgedFails wants pinfs validate and pinfs approve of d, a pin whose
// a.bin has another member's digest, to fail naming a.bin, without flags
// and with each set of flags; approve then signs nothing.
func forgedFails(t *testing.T, env []string, d, st string, keys *signers, flagSets ...[]string) {
	t.Helper()
	for _, flags := range append([][]string{nil}, flagSets...) {
		for cmd, args := range map[string][]string{"validate": {"validate", d}, "approve": {"approve", d, "--key", keys.aliceKey}} {
			r := wantExit(t, env, 1, []string{"not VALIDATED"}, slices.Concat(args, []string{"--store", st}, flags)...)
			if !strings.Contains(r.stderr, "pinfs "+cmd+": mismatch: a.bin: ") || !strings.Contains(r.stderr, "(1 members: a.bin)") {
				t.Errorf("%s %v of the forged pin: stderr does not name a.bin's mismatch:\n%v", cmd, flags, r)
			}
		}
	}
}

// copyReportAs does what anyone who can write the store can: it copies the
// passing report of validate --json (rep) as a report of manifest d,
// newest by its own validatedAt, with the marker that makes d VALIDATED.
func (ts *trustStore) copyReportAs(t *testing.T, rep map[string]any, d string) {
	t.Helper()
	delete(rep, "report")
	rep["manifest"], rep["validatedAt"] = d, "2099-01-01T00:00:00Z"
	b, err := jcs.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	rd := verify.SHA256(b)
	for key, v := range map[string][]byte{"reports/sha256/" + rd.Hex(): b, "admission/sha256/" + hexOf(d) + "/validated/" + rd.Hex(): []byte(rd.String() + "\n")} {
		if err := ts.st.Put(t.Context(), key, v); err != nil {
			t.Fatal(err)
		}
	}
}

// TestApproveSignsOnlyItsOwnValidation is the review's blocker: a store
// writer stores a copy of d1's passing report as d2's, newest. d2 then
// shows VALIDATED, but approve validates d2 itself and refuses naming
// a.bin, and nothing activates it. A child that inherits d2's forged
// digest on the store's word (approve without a policy) gets an approval
// that counts under no policy: alias set refuses it, and approve under the
// policy finds a.bin.
func TestApproveSignsOnlyItsOwnValidation(t *testing.T) {
	eachTrustStore(t, func(t *testing.T, ts *trustStore) {
		env, st := ts.env, ts.store
		d1, d2 := ts.forgedRepin(t)
		keys := newSigners(t)
		policy := []string{"--policy", keys.policy}
		rep, _ := reportOf(t, env, 0, d1, "--store", st)
		ts.copyReportAs(t, rep, d2)
		wantExit(t, env, 0, []string{"VALIDATED"}, "status", d2, "--store", st)
		forgedFails(t, env, d2, st, keys, policy)
		refused(t, env, 1, []string{"not approved"}, append([]string{"alias", "set", "prod", d2, "--store", st}, policy...)...)

		ts.s.Put(t, "data", "ds/c.bin", []byte("CCCC"))
		child, _ := incrementalPin(t, env, "s3://data/ds/", "--store", st, "--parent", d2)
		r := mustPinfs(t, env, "approve", child, "--store", st, "--key", keys.aliceKey)
		if !strings.Contains(r.stderr, "counts under no policy") || !strings.Contains(r.stdout, "\n  report sha256:") {
			t.Errorf("approve of the child without a policy: want its report line and a note that it counts under no policy:\n%v", r)
		}
		refused(t, env, 1, []string{"not approved", "on the store's word"}, append([]string{"alias", "set", "prod", child, "--store", st}, policy...)...)
		_, rd, _ := strings.Cut(r.stdout, "  report ")
		rd, _, _ = strings.Cut(rd, "\n")
		refused(t, env, 1, []string{"not VALIDATED", "on the store's word"},
			append([]string{"approve", child, "--store", st, "--key", keys.aliceKey, "--report", rd}, policy...)...)
		wantExit(t, env, 1, []string{"pinfs approve: mismatch: a.bin"}, append([]string{"approve", child, "--store", st, "--key", keys.aliceKey}, policy...)...)
	})
}
