package sign

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pinfs/pinfs/verify"
)

// reportsOK is a reportOK that accepts reportD only.
func reportsOK(_ context.Context, d verify.Digest) error {
	if d != reportD {
		return errors.New("no such report")
	}
	return nil
}

func writePolicy(t testing.TB, dir string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPolicyFilesAndInlinePEM: key files relative to the policy's own
// directory (not the working directory) and inline PEM, and a digest that
// names the keys and threshold, not how they are written.
func TestPolicyFilesAndInlinePEM(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if err := os.Mkdir(keys, 0o755); err != nil {
		t.Fatal(err)
	}
	alice, _ := newKey(t, keys, "alice")
	bob, bobPub := newKey(t, keys, "bob")
	p, err := LoadPolicy(writePolicy(t, keys, map[string]any{
		"approvers": []string{"alice.pub", string(readPub(t, bobPub))}, "threshold": 2}))
	if err != nil {
		t.Fatal(err)
	}
	if p.Threshold() != 2 || len(p.KeyIDs()) != 2 || len(p.Roles()) != 0 {
		t.Fatalf("policy: threshold %d, keys %v, roles %v", p.Threshold(), p.KeyIDs(), p.Roles())
	}
	envs := [][]byte{mustSign(t, alice, manifestD, Approval{Time: when}), mustSign(t, bob, manifestD, Approval{Time: when})}
	sigs, err := p.Check(context.Background(), envs, manifestD, reportsOK)
	if err != nil || len(sigs) != 2 {
		t.Fatalf("Check = %d signatures, %v", len(sigs), err)
	}
	if d := p.Digest(); !strings.HasPrefix(string(d), "sha256:") || !strings.Contains(p.Describe(sigs[0]), string(d)) {
		t.Errorf("digest %s, describe %q", d, p.Describe(sigs[0]))
	}

	// The same keys listed the other way round, by absolute path: same digest.
	same, err := parsePolicy([]byte(`{"approvers":["`+filepath.Join(keys, "bob.pub")+`","alice.pub"],"threshold":2}`), keys, true)
	if err != nil {
		t.Fatal(err)
	}
	if same.Digest() != p.Digest() {
		t.Errorf("the same policy written differently has digest %s, want %s", same.Digest(), p.Digest())
	}
	for _, other := range []string{
		`{"approvers":["alice.pub","bob.pub"],"threshold":1}`,
		`{"approvers":["alice.pub","bob.pub"],"threshold":2,"roles":["approver"]}`,
		`{"approvers":["alice.pub"],"threshold":1}`,
	} {
		q, err := parsePolicy([]byte(other), keys, true)
		if err != nil {
			t.Fatal(err)
		}
		if q.Digest() == p.Digest() {
			t.Errorf("policy %s has the same digest as a different one", other)
		}
	}
}

func TestBadPoliciesRefused(t *testing.T) {
	dir := t.TempDir()
	newKey(t, dir, "alice")
	newKey(t, dir, "bob")
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	ecPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecDER}))
	if err := os.Mkdir(filepath.Join(dir, "adir.pub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ policy, want string }{
		{`{"approvers":["alice.pub","bob.pub"],"threshold":0}`, "threshold 0 is not between 1 and the number of approvers (2)"},
		{`{"approvers":["alice.pub","bob.pub"],"threshold":3}`, "threshold 3 is not between 1 and the number of approvers (2)"},
		{`{"approvers":["alice.pub"],"threshold":-1}`, "threshold -1 is not between"},
		{`{"approvers":["alice.pub"]}`, `no "threshold"`},
		{`{"approvers":[],"threshold":1}`, `no "approvers"`},
		{`{"approvers":["alice.pub"],"threshold":1,"treshold":2}`, `unknown field "treshold"`},
		{`{"approvers":["alice.pub"],"threshold":1} {}`, "data after the JSON value"},
		{`{"approvers":["alice.pub"],"threshold":1,"roles":[""]}`, "an empty role"},
		{`{"approvers":["carol.pub"],"threshold":1}`, "approver 1: open " + filepath.Join(dir, "carol.pub") + ": no such file"},
		{`{"approvers":["alice.pub","adir.pub"],"threshold":1}`, "approver 2: " + filepath.Join(dir, "adir.pub") + " is a directory, not a regular file"},
		{`{"approvers":["alice.key"],"threshold":1}`, `approver 1: ` + filepath.Join(dir, "alice.key") + `: PEM block is "PRIVATE KEY", want "PUBLIC KEY"`},
		{`{"approvers":[` + jsonString(ecPEM) + `],"threshold":1}`, "approver 1: inline key: public key: a *ecdsa.PublicKey, pinfs verifies ed25519 keys only"},
		{`{"approvers":["-----BEGIN PUBLIC KEY-----\nnot base64"],"threshold":1}`, `approver 1: inline key: no PEM "PUBLIC KEY" block`},
		{`{"approvers":["alice.pub","bob.pub","alice.pub"],"threshold":2}`, "approvers 1 and 3 are the same key sha256:"},
		{`{"approvers":[""],"threshold":1}`, "empty key file name"},
	} {
		path := filepath.Join(dir, "policy.json")
		if err := os.WriteFile(path, []byte(c.policy), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadPolicy(path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "trust policy "+path+": ") {
			t.Errorf("policy %s:\n got %v\nwant trust policy %s: …%s…", c.policy, err, path, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("policy %s: error is not one line: %q", c.policy, err)
		}
	}
	if _, err := LoadPolicy(filepath.Join(dir, "nope.json")); err == nil || !strings.Contains(err.Error(), "nope.json") {
		t.Errorf("a missing policy file: %v", err)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestCheckCountsDistinctKeys: threshold 2; one key signing twice (two
// envelopes, even for different reports) is still one approval.
func TestCheckCountsDistinctKeys(t *testing.T) {
	dir := t.TempDir()
	alice, _ := newKey(t, dir, "alice")
	bob, _ := newKey(t, dir, "bob")
	newKey(t, dir, "carol")
	p, err := LoadPolicy(writePolicy(t, dir, map[string]any{"approvers": []string{"alice.pub", "bob.pub", "carol.pub"}, "threshold": 2}))
	if err != nil {
		t.Fatal(err)
	}
	a1 := mustSign(t, alice, manifestD, Approval{Time: when})
	a2 := mustSign(t, alice, manifestD, Approval{Time: when.Add(1e9), Role: "data-owner"})
	sigs, err := p.Check(context.Background(), [][]byte{a1, a2, a1}, manifestD, reportsOK)
	if !errors.Is(err, ErrNotApproved) || !strings.Contains(err.Error(), "1 of 2 required approvals") {
		t.Fatalf("one key signing three times: Check = %v", err)
	}
	if len(sigs) != 1 || sigs[0].KeyID != alice.KeyID() {
		t.Fatalf("Check counted %+v", sigs)
	}
	sigs, err = p.Check(context.Background(), [][]byte{a1, a2, mustSign(t, bob, manifestD, Approval{Time: when})}, manifestD, reportsOK)
	if err != nil || len(sigs) != 2 {
		t.Fatalf("alice and bob: Check = %d signatures, %v", len(sigs), err)
	}
	if _, err := p.Check(context.Background(), nil, manifestD, reportsOK); err == nil ||
		err.Error() != "not approved under the trust policy: 0 of 2 required approvals: no approvals recorded" {
		t.Fatalf("no envelopes: Check = %v", err)
	}
}

// TestCheckDoesNotCount: every way an envelope can fail to be an approval
// of this manifest, each named in the one-line reason.
func TestCheckDoesNotCount(t *testing.T) {
	dir := t.TempDir()
	alice, _ := newKey(t, dir, "alice")
	bob, _ := newKey(t, dir, "bob")
	carol, _ := newKey(t, dir, "carol")
	mallory, _ := newKey(t, t.TempDir(), "mallory")
	p, err := LoadPolicy(writePolicy(t, dir, map[string]any{
		"approvers": []string{"alice.pub", "bob.pub", "carol.pub"}, "threshold": 1, "roles": []string{"approver", "data-owner"}}))
	if err != nil {
		t.Fatal(err)
	}
	good := mustSign(t, alice, manifestD, Approval{Time: when})
	tampered := reenvelope(t, good, func(pt string, b []byte) (string, []byte) {
		return pt, []byte(strings.ReplaceAll(string(b), "2026", "2025"))
	})
	badReport, err := bob.Sign(context.Background(), manifestD, otherD, Approval{Time: when})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  []byte
		want string
	}{
		{"tampered", tampered, "key " + alice.KeyID() + ": signature invalid"},
		{"key not in the policy", mustSign(t, mallory, manifestD, Approval{Time: when}), "signed by " + mallory.KeyID() + ", not in the policy"},
		{"another manifest", mustSign(t, bob, otherD, Approval{Time: when}), "key " + bob.KeyID() + ": approves manifest " + otherD.String() + ", not " + manifestD.String()},
		{"failing report", badReport, "key " + bob.KeyID() + ": report " + otherD.String() + ": no such report"},
		{"role not allowed", mustSign(t, carol, manifestD, Approval{Role: "intern", Time: when}), `key ` + carol.KeyID() + `: role "intern" is not one the policy accepts (approver, data-owner)`},
		{"not an envelope", []byte(`{"payload":"x"}`), ": payload type \"\", want"},
	}
	var all [][]byte
	for _, c := range cases {
		all = append(all, c.env)
		_, err := p.Check(context.Background(), [][]byte{c.env}, manifestD, reportsOK)
		if !errors.Is(err, ErrNotApproved) || !strings.Contains(err.Error(), "0 of 1 required approvals: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Check = %v\nwant it to say %q", c.name, err, c.want)
		}
	}
	_, err = p.Check(context.Background(), all, manifestD, reportsOK)
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Fatalf("all of them: Check = %q, want one line", err)
	}
	for _, c := range cases {
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("all of them: %q lacks %q", err, c.want)
		}
	}
	// The control: the untouched envelope counts, and a failure by a key
	// that also approved validly is not reported.
	if sigs, err := p.Check(context.Background(), append(all, good), manifestD, reportsOK); err != nil || len(sigs) != 1 {
		t.Fatalf("with a good envelope: Check = %v, %v", sigs, err)
	}
	if _, err := p.Check(context.Background(), [][]byte{good}, manifestD, nil); err == nil || !strings.Contains(err.Error(), "no report check given") {
		t.Fatalf("without a report check: %v", err)
	}
}

func TestCanonicalPolicyParsesBackToTheSamePolicy(t *testing.T) {
	dir := t.TempDir()
	var approvers []string
	for _, name := range []string{"alice", "bob"} {
		pub, _, err := Generate(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		approvers = append(approvers, filepath.Base(pub))
	}
	src, _ := json.Marshal(map[string]any{"approvers": approvers, "threshold": 2, "roles": []string{"approver"}})
	p, err := parsePolicy(src, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParseKeptPolicy(b)
	if err != nil {
		t.Fatalf("canonical policy does not parse back: %v\n%s", err, b)
	}
	if q.Digest() != p.Digest() || q.Threshold() != 2 || len(q.Keys()) != 2 {
		t.Fatalf("round trip changed the policy: %s -> %s", p.Digest(), q.Digest())
	}
	if !bytes.Contains(b, []byte("BEGIN PUBLIC KEY")) {
		t.Fatalf("canonical policy is not self-contained:\n%s", b)
	}
}

// TestParseKeptPolicyOpensNoFile: a kept policy that names a key file is
// refused without opening it (a FIFO there would block an open forever).
func TestParseKeptPolicyOpensNoFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "alice.pub")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{fifo, "alice.pub"} {
		b, _ := json.Marshal(map[string]any{"approvers": []string{name}, "threshold": 1})
		if _, err := ParseKeptPolicy(b); err == nil || !strings.Contains(err.Error(), "must carry its keys inline") {
			t.Fatalf("ParseKeptPolicy naming %s = %v; want a refusal", name, err)
		}
	}
}

// TestUserKeyFilesThroughLinks: a policy, the key files it names and a
// signing key are the user's own files, read through a symbolic link; the
// mode LoadSigner checks is that of the key the link leads to.
func TestUserKeyFilesThroughLinks(t *testing.T) {
	dir := t.TempDir()
	s, pub := newKey(t, dir, "alice")
	links := t.TempDir()
	link := func(target, name string) string {
		t.Helper()
		l := filepath.Join(links, name)
		if err := os.Symlink(target, l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	link(pub, "alice.pub")
	policy := link(writePolicy(t, dir, map[string]any{"approvers": []string{filepath.Join(links, "alice.pub")}, "threshold": 1}), "policy.json")
	p, err := LoadPolicy(policy)
	if err != nil || len(p.KeyIDs()) != 1 || p.KeyIDs()[0] != s.KeyID() {
		t.Fatalf("LoadPolicy through links: %v, %v", p, err)
	}
	key := link(filepath.Join(dir, "alice.key"), "alice.key")
	if got, err := LoadSigner(key); err != nil || got.KeyID() != s.KeyID() {
		t.Fatalf("LoadSigner through a link: %v", err)
	}
	if err := os.Chmod(filepath.Join(dir, "alice.key"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSigner(key); err == nil || !strings.Contains(err.Error(), "mode 0640") {
		t.Fatalf("LoadSigner through a link to a key group can read: %v; want it refused", err)
	}
}
