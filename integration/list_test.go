package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/fusetest"
)

// listing is the part of pinfs list --json the tests look at.
type listing struct {
	Store     string
	Manifests []struct {
		Digest, State, Purpose string
		Time                   time.Time
		Members, Bytes         int64
		Parents                []string
		Gates                  []struct{ Gate string }
	}
	Invalid []struct{ Key, Reason string }
}

// TestListOnS3: pinfs list on an S3 store lists every manifest, newest
// first, with the pin time S3 recorded and the state pinfs status gives;
// a manifest overwritten with other bytes is not listed but named, exit 1.
// The errors that point to it (an unknown digest, through the mount's
// daemon too) and to pinfs resolve (an alias) name this store.
func TestListOnS3(t *testing.T) {
	t.Parallel()
	fusetest.Require(t)
	a := s3AdmStore(t)
	for rel, b := range admSource(t) {
		a.put(t, rel, b)
	}
	keys := newSigners(t)
	start := time.Now().Truncate(time.Second)

	building := a.pinAt(t, "building", 0, 0)
	time.Sleep(1100 * time.Millisecond) // S3 times are to the second: one pin a second, so the order is the test's
	child := mustPinfs(t, a.env, "pin", a.source, "--store", a.store, "--purpose", "child", "--parent", building).lastLine()
	time.Sleep(1100 * time.Millisecond)
	validated := a.pinAt(t, "validated", 0, 0)
	mustPinfs(t, a.env, "validate", validated, "--store", a.store, "--alias", "support")
	time.Sleep(1100 * time.Millisecond)
	approved, _ := a.candidate(t, keys, "support", "approved", 0, 0)
	time.Sleep(1100 * time.Millisecond)
	active, _ := a.candidate(t, keys, "support", "active", 0, 0)
	mustPinfs(t, a.env, "alias", "set", "support", active, "--store", a.store, "--policy", keys.policy)
	end := time.Now()

	var l listing
	jsonOf(t, a.env, &l, "list", "--store", a.store, "--json", "--policy", keys.policy)
	var got []string
	for _, e := range l.Manifests {
		got = append(got, e.Digest)
		if e.Time.Before(start) || e.Time.After(end) || e.Members != 3 || e.Bytes != 100_000+6+8 {
			t.Errorf("%s (%s): time %v (pins ran %v to %v), %d members, %d bytes", e.Digest, e.Purpose, e.Time, start, end, e.Members, e.Bytes)
		}
		if want := a.status(t, e.Digest, keys.policy).State; e.State != want {
			t.Errorf("%s (%s) listed %s, pinfs status says %s", e.Digest, e.Purpose, e.State, want)
		}
	}
	if want := []string{active, approved, validated, child, building}; !slices.Equal(got, want) {
		t.Fatalf("listed\n%v\nwant newest first\n%v", got, want)
	}
	states := []string{"ACTIVE", "APPROVED", "VALIDATED", "BUILDING", "BUILDING"}
	for i, e := range l.Manifests {
		if e.State != states[i] {
			t.Errorf("%s is %s, want %s", e.Purpose, e.State, states[i])
		}
	}
	if c := l.Manifests[3]; !slices.Equal(c.Parents, []string{building}) || c.Purpose != "child" {
		t.Errorf("child: parents %v, purpose %q", c.Parents, c.Purpose)
	}
	if g := l.Manifests[0].Gates; len(g) != 1 || g[0].Gate != "support" || l.Store != a.store || len(l.Invalid) != 0 {
		t.Errorf("active's gates %+v, store %q, invalid %v", g, l.Store, l.Invalid)
	}
	text := mustPinfs(t, a.env, "list", "--store", a.store)
	if lines := strings.Split(strings.TrimSpace(text.stdout), "\n"); len(lines) != 6 ||
		!slices.Equal(strings.Fields(lines[1])[1:], []string{active, "ACTIVE", "3", "100014", "0", "active"}) {
		t.Errorf("pinfs list:\n%s", text.stdout)
	}

	// The building manifest's key gets a new version holding child's bytes:
	// it no longer hashes to its name.
	a.replace(t, "manifests/sha256/"+hexOf(building), a.get(t, "manifests/sha256/"+hexOf(child)))
	r := wantExit(t, a.env, 1, []string{"level=WARN", "manifests/sha256/" + hexOf(building)}, "list", "--store", a.store, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Manifests) != 4 || len(l.Invalid) != 1 || !strings.Contains(l.Invalid[0].Reason, "content hashes to "+child) {
		t.Errorf("after the overwrite: %d manifests, invalid %+v; want 4 and the overwritten key", len(l.Manifests), l.Invalid)
	}
	for _, e := range l.Manifests {
		if e.Digest == building {
			t.Errorf("the overwritten %s is listed", building)
		}
	}

	// The errors that name pinfs list and pinfs resolve, for this store.
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fusetest.ForceUnmount(t, mnt) }) // should it mount after all
	unknown := "sha256:" + strings.Repeat("0", 64)
	oneLineError(t, pinfs(t, a.env, "mount", unknown, mnt, "--store", a.store, "--cache-dir", t.TempDir()), 1,
		"pinfs mount: no manifest "+unknown+" in store "+a.store+"; pinfs list --store "+a.store+" lists the manifests it holds")
	oneLineError(t, pinfs(t, a.env, "mount", "support", mnt, "--store", a.store), 2,
		"; if support is an alias, resolve it first: pinfs resolve support --store "+a.store)
	oneLineError(t, pinfs(t, a.env, "ls", hexOf(active), "--store", a.store), 2, "; did you mean "+active+"?")
	if resolved := mustPinfs(t, a.env, "resolve", "support", "--store", a.store).lastLine(); resolved != active {
		t.Errorf("pinfs resolve support = %s, want %s", resolved, active)
	}
}
