package admission

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify/sign"
)

// TestLoadPolicyRefusesKeyFiles: a policy kept in the store that names an
// approver key file (here an absolute path to a real key, so that its
// digest is right) is refused: bytes from a store must not make pinfs open
// local files. SavePolicy keeps keys inline, and that loads.
func TestLoadPolicyRefusesKeyFiles(t *testing.T) {
	ctx := t.Context()
	st := newLocal(t)
	k := newKeyring(t)
	k.signer("alice")
	p := k.policy(1, "alice")
	b, err := json.Marshal(map[string]any{"approvers": []string{filepath.Join(k.dir, "alice.pub")}, "threshold": 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, policyKey(p.Digest()), b); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPolicy(ctx, st, p.Digest()); err == nil || !strings.Contains(err.Error(), "must carry its keys inline") {
		t.Fatalf("LoadPolicy of a kept policy naming a key file = %v; want a refusal", err)
	}

	other := newLocal(t)
	d, err := SavePolicy(ctx, other, p)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := other.Get(ctx, policyKey(d))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sign.ParseKeptPolicy(kept); err != nil {
		t.Fatalf("SavePolicy kept a policy that is not self-contained: %v\n%s", err, kept)
	}
	if q, err := LoadPolicy(ctx, other, d); err != nil || q.Digest() != p.Digest() {
		t.Fatalf("LoadPolicy of a saved policy = %v, %v", q, err)
	}
}
