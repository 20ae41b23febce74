package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAliasSetOverDeletedHead: with gate prod's head deleted from the
// store, pinfs alias set does not create the gate again at generation 1
// (dropping its history and fences): it refuses on one line, and resolve
// finds no gate.
func TestAliasSetOverDeletedHead(t *testing.T) {
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
	refused(t, a.env, 1, []string{"no such gate"}, "resolve", "prod", "--store", a.store)
}
