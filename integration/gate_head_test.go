package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAliasSetOverDeletedHead: with gate prod's head deleted from the
// store, pinfs alias set does not create the gate again at generation 1
// (dropping its history and fences): it refuses on one line, and so does
// resolve.
func TestAliasSetOverDeletedHead(t *testing.T) {
	t.Parallel()
	a := localAdmStore(t)
	for rel, b := range admSource(t) {
		a.put(t, rel, b)
	}
	s := newSigners(t)
	d, _ := a.candidate(t, s, "prod", "support", 0, 0)
	mustPinfs(t, a.env, "alias", "set", "prod", d, "--store", a.store, "--policy", s.policy)
	if err := os.Remove(filepath.Join(a.store, "gates", "prod", "head")); err != nil {
		t.Fatal(err)
	}
	refused(t, a.env, 1, []string{"gate prod", "refusing to create the gate again"},
		"alias", "set", "prod", d, "--store", a.store, "--policy", s.policy)
	refused(t, a.env, 1, []string{"gate prod", "the head was deleted"}, "resolve", "prod", "--store", a.store)
}

// TestGateHeadRolledBack: with generation 1's record copied over gate
// prod's head (its chain still reaches generation 1), resolve, admit and
// alias set refuse on one line, rather than admit at generation 1's lower
// tombstone watermark what the real head (generation 3, watermark 7)
// refuses.
func TestGateHeadRolledBack(t *testing.T) {
	t.Parallel()
	a := localAdmStore(t)
	for rel, b := range admSource(t) {
		a.put(t, rel, b)
	}
	s := newSigners(t)
	const purpose = "rolled"
	d1, _ := a.candidate(t, s, "prod", purpose, 1, 0)
	mustPinfs(t, a.env, "alias", "set", "prod", d1, "--store", a.store, "--policy", s.policy)
	mustPinfs(t, a.env, "fence", "prod", "--tombstone", "7", "--store", a.store)
	d3, _ := a.candidate(t, s, "prod", purpose, 7, 0)
	mustPinfs(t, a.env, "alias", "set", "prod", d3, "--store", a.store)
	hist := a.history(t, "prod")
	if len(hist) != 3 || hist[0].TombstoneWatermark != 7 {
		t.Fatalf("test setup: gate prod %+v", hist)
	}
	a.replace(t, "gates/prod/head", a.get(t, "gates/prod/records/sha256/"+hexOf(hist[1].Prev)))

	want := []string{"gate prod: head is at generation 1 but records/ holds generation 3", "rolled back"}
	r := refused(t, a.env, 1, want, "resolve", "prod", "--store", a.store)
	if strings.Contains(r.stdout, d1) {
		t.Errorf("resolve printed the rolled back head's digest: %v", r)
	}
	refused(t, a.env, 1, want, "admit", "prod", "--purpose", purpose, "--store", a.store, "--run-record", a.records[0],
		"--run-id", "job-1", "--policy", s.policy)
	refused(t, a.env, 1, want, "alias", "set", "prod", d1, "--store", a.store, "--policy", s.policy)
	if _, err := os.Stat(a.records[0]); !os.IsNotExist(err) {
		t.Errorf("a refused admit wrote the run record: %v", err)
	}
}
