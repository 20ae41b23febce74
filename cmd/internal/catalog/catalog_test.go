package catalog_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/admission"
	"github.com/pinfs/pinfs/cmd/internal/catalog"
	"github.com/pinfs/pinfs/cmd/internal/pin"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

func newStore(t testing.TB) *localstore.Store {
	t.Helper()
	ls, err := localstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// pinFiles pins files (path: content) from a new directory into st, the
// way pinfs pin DIR does.
func pinFiles(t testing.TB, st store.Store, o pin.Options, files map[string]string) verify.Digest {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o.Jobs = 2
	d, err := (&pin.Pinner{Store: st, Options: o}).Dir(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// putManifest stores a manifest (without a member table: List reads
// none) and returns its digest.
func putManifest(t testing.TB, st store.Blobs, m *verify.Manifest) (verify.Digest, []byte) {
	t.Helper()
	m.Members = verify.MembersRef{URI: verify.MembersURI(verify.SHA256(nil)), Count: 0, Bytes: 0}
	b, err := verify.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(t.Context(), verify.ManifestKey(m.SnapshotID), b); err != nil {
		t.Fatal(err)
	}
	return m.SnapshotID, b
}

// setTime sets the modification time of d's manifest in the local store
// at root: the pin time List reports.
func setTime(t testing.TB, root string, d verify.Digest, at time.Time) {
	t.Helper()
	if err := os.Chtimes(filepath.Join(root, filepath.FromSlash(verify.ManifestKey(d))), at, at); err != nil {
		t.Fatal(err)
	}
}

func digests(l *catalog.Listing) []verify.Digest {
	var ds []verify.Digest
	for _, e := range l.Manifests {
		ds = append(ds, e.Digest)
	}
	return ds
}

// TestListNewestFirstWithWhatTheManifestSays: every manifest, newest pin
// first, with its members, bytes, purpose and parents and the time the
// store wrote it.
func TestListNewestFirstWithWhatTheManifestSays(t *testing.T) {
	dir := t.TempDir()
	st, err := localstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := pinFiles(t, st, pin.Options{Purpose: "support-v3"}, map[string]string{"a": "alpha", "b": "be"})
	b := pinFiles(t, st, pin.Options{Parents: []verify.Digest{a}}, map[string]string{"a": "alpha", "b": "be", "c": "sea"})
	c, _ := putManifest(t, st, &verify.Manifest{Purpose: "eval"})
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	setTime(t, dir, a, t0)
	setTime(t, dir, b, t0.Add(2*time.Hour))
	setTime(t, dir, c, t0.Add(time.Hour))

	l, err := catalog.List(t.Context(), st, catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := digests(l), []verify.Digest{b, c, a}; !slices.Equal(got, want) {
		t.Fatalf("listed %v, want newest first %v", got, want)
	}
	if len(l.Invalid) != 0 || l.Store != st.String() {
		t.Errorf("store %q, invalid %v", l.Store, l.Invalid)
	}
	eb, ea := l.Manifests[0], l.Manifests[2]
	if eb.Members != 3 || eb.Bytes != 10 || eb.Purpose != "" || !slices.Equal(eb.Parents, []verify.Digest{a}) ||
		!eb.Time.Equal(t0.Add(2*time.Hour)) || eb.State != admission.StateBuilding {
		t.Errorf("child entry %+v", eb)
	}
	if ea.Members != 2 || ea.Bytes != 7 || ea.Purpose != "support-v3" || len(ea.Parents) != 0 || ea.Parents == nil || !ea.Time.Equal(t0) {
		t.Errorf("parent entry %+v", ea)
	}

	// An empty store lists nothing, and says so as [] in JSON.
	l, err = catalog.List(t.Context(), newStore(t), catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(l); !strings.Contains(string(b), `"manifests":[],"invalid":[]`) {
		t.Errorf("empty listing %s", b)
	}
}

// TestListShowsOnlyWhatVerifies: a listing is the store's claim, so a key
// whose bytes do not hash to its name (a copy of another manifest, a
// changed one), garbage, or a key that is not a digest is never listed as
// a manifest but reported as invalid with why.
func TestListShowsOnlyWhatVerifies(t *testing.T) {
	st := newStore(t)
	ctx := t.Context()
	good, gb := putManifest(t, st, &verify.Manifest{Purpose: "good"})
	other, _ := putManifest(t, st, &verify.Manifest{Purpose: "other"})
	// other's key now holds good's bytes: valid JSON, valid manifest, wrong name.
	if err := os.WriteFile(filepath.Join(st.String(), filepath.FromSlash(verify.ManifestKey(other))), gb, 0o644); err != nil {
		t.Fatal(err)
	}
	// A manifest whose purpose was edited after the digest was taken.
	edited, eb := putManifest(t, st, &verify.Manifest{Purpose: "eval"})
	eb = []byte(strings.Replace(string(eb), `"eval"`, `"prod"`, 1))
	if err := os.WriteFile(filepath.Join(st.String(), filepath.FromSlash(verify.ManifestKey(edited))), eb, 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := verify.ManifestKey(verify.SHA256([]byte("garbage")))
	if err := st.Put(ctx, garbage, []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "manifests/sha256/latest", gb); err != nil {
		t.Fatal(err)
	}

	l, err := catalog.List(ctx, st, catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := digests(l); !slices.Equal(got, []verify.Digest{good}) {
		t.Errorf("listed %v, want only %s", got, good)
	}
	reasons := map[string]string{}
	for _, inv := range l.Invalid {
		reasons[inv.Key] = inv.Reason
	}
	for key, want := range map[string]string{
		verify.ManifestKey(other):  "content hashes to",
		verify.ManifestKey(edited): "content hashes to",
		garbage:                    "invalid",
		"manifests/sha256/latest":  "not named by a manifest digest",
	} {
		if r, ok := reasons[key]; !ok || !strings.Contains(r, want) {
			t.Errorf("invalid %s: reason %q, want one with %q (all: %v)", key, r, want, l.Invalid)
		}
	}
	if len(l.Invalid) != 4 {
		t.Errorf("%d invalid keys, want 4: %v", len(l.Invalid), l.Invalid)
	}
}

// TestListStates: each manifest's state is the one pinfs status reports:
// BUILDING, VALIDATED, APPROVED (under the policy given) and ACTIVE.
func TestListStates(t *testing.T) {
	st := newStore(t)
	ctx := t.Context()
	keys := t.TempDir()
	_, keyPath, err := sign.Generate(filepath.Join(keys, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	alice, err := sign.LoadSigner(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	policyFile := filepath.Join(keys, "policy.json")
	if err := os.WriteFile(policyFile, []byte(`{"approvers": ["alice.pub"], "threshold": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := sign.LoadPolicy(policyFile)
	if err != nil {
		t.Fatal(err)
	}
	o := pin.Options{Purpose: "train", TombstoneWatermark: new(int64), BenchmarkFence: new(int64)}
	building := pinFiles(t, st, o, map[string]string{"a": "1"})
	validated := pinFiles(t, st, o, map[string]string{"a": "2"})
	approved := pinFiles(t, st, o, map[string]string{"a": "3"})
	active := pinFiles(t, st, o, map[string]string{"a": "4"})
	for _, d := range []verify.Digest{validated, approved, active} {
		r, err := admission.Validate(ctx, st, d, nil, admission.Options{})
		if err != nil || !r.OK {
			t.Fatalf("validate %s: %v %+v", d, err, r)
		}
		if _, err := admission.Save(ctx, st, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []verify.Digest{approved, active} {
		passed, err := admission.Validated(ctx, st, d)
		if err != nil || len(passed) == 0 {
			t.Fatalf("validated %s: %v", d, err)
		}
		if _, _, err := admission.Approve(ctx, st, d, alice, passed[0], nil, sign.Approval{Approver: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admission.Activate(ctx, st, admission.Activation{Gate: "support", Digest: active, Expect: -1, Policy: p}); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		policy *sign.Policy
		want   map[verify.Digest]string
	}{
		{p, map[verify.Digest]string{building: admission.StateBuilding, validated: admission.StateValidated,
			approved: admission.StateApproved, active: admission.StateActive}},
		// Without a policy nothing says whose signature counts: VALIDATED.
		{nil, map[verify.Digest]string{building: admission.StateBuilding, validated: admission.StateValidated,
			approved: admission.StateValidated, active: admission.StateActive}},
	} {
		l, err := catalog.List(ctx, st, catalog.Options{Policy: c.policy, Jobs: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Manifests) != 4 {
			t.Fatalf("listed %d manifests, want 4: %+v", len(l.Manifests), l)
		}
		for _, e := range l.Manifests {
			s, err := admission.StatusOf(ctx, st, e.Digest, c.policy)
			if err != nil {
				t.Fatal(err)
			}
			if e.State != c.want[e.Digest] || e.State != s.State {
				t.Errorf("policy %v: %s listed %s, want %s (pinfs status says %s)", c.policy != nil, e.Digest, e.State, c.want[e.Digest], s.State)
			}
			wantGates := []admission.AliasRef{}
			if e.Digest == active {
				wantGates = s.Aliases
			}
			if !slices.EqualFunc(e.Gates, wantGates, func(a, b admission.AliasRef) bool {
				return a.Gate == b.Gate && a.Current == b.Current && slices.Equal(a.Generations, b.Generations)
			}) {
				t.Errorf("%s gates %+v, want %+v", e.Digest, e.Gates, wantGates)
			}
		}
	}
}

// slowStore delays every read of a blob and counts how many run at once.
type slowStore struct {
	*localstore.Store
	inFlight, peak atomic.Int32
	gets           atomic.Int32
}

func (s *slowStore) Get(ctx context.Context, key string) ([]byte, error) {
	return s.GetAtMost(ctx, key, store.MaxBlob(key))
}

func (s *slowStore) GetAtMost(ctx context.Context, key string, max int64) ([]byte, error) {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	s.gets.Add(1)
	time.Sleep(5 * time.Millisecond)
	return s.Store.GetAtMost(ctx, key, max)
}

// TestListReadsInBoundedParallel: hundreds of manifests are read Jobs at
// a time, neither one by one nor all at once (300 reads of 5 ms each take
// 1.5 s one by one, about 0.1 s 16 at a time), each once.
func TestListReadsInBoundedParallel(t *testing.T) {
	ls := newStore(t)
	const n = 300
	for i := range n {
		putManifest(t, ls, &verify.Manifest{Purpose: "p" + string(rune('a'+i%26)), SelectionPolicy: strings.Repeat("x", i)})
	}
	st := &slowStore{Store: ls}
	start := time.Now()
	l, err := catalog.List(t.Context(), st, catalog.Options{Jobs: 16})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Manifests) != n || st.gets.Load() != n {
		t.Fatalf("listed %d manifests with %d reads, want %d with one read each", len(l.Manifests), st.gets.Load(), n)
	}
	if p := st.peak.Load(); p != 16 {
		t.Errorf("at most %d reads at once, want 16 (Jobs)", p)
	}
	// Wall time is not asserted (two shared cores here); the peak is what
	// bounds it.
	t.Logf("listed %d manifests, 5 ms a read, in %v", n, took)
}
