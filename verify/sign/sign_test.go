package sign

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/jcs"
)

var (
	manifestD = verify.SHA256([]byte("manifest"))
	reportD   = verify.SHA256([]byte("report"))
	otherD    = verify.SHA256([]byte("another manifest"))
	when      = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
)

// newKey generates a key pair under dir as PREFIX name and returns its
// signer and the path of its public key.
func newKey(t testing.TB, dir, name string) (*Signer, string) {
	t.Helper()
	pub, key, err := Generate(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	return s, pub
}

func mustSign(t testing.TB, s *Signer, m verify.Digest, a Approval) []byte {
	t.Helper()
	env, err := s.Sign(context.Background(), m, reportD, a)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func readPub(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s, pubPath := newKey(t, dir, "alice")
	pub, err := ParsePublicKey(readPub(t, pubPath))
	if err != nil {
		t.Fatal(err)
	}
	if KeyID(pub) != s.KeyID() || !strings.HasPrefix(s.KeyID(), "sha256:") || len(s.KeyID()) != 71 {
		t.Fatalf("key ids: pub %s, signer %s", KeyID(pub), s.KeyID())
	}
	local := time.Date(2026, 3, 4, 6, 6, 7, 999, time.FixedZone("CET", 3600))
	env := mustSign(t, s, manifestD, Approval{Approver: "alice@host", Time: local, Purpose: "train"})
	sig, err := Open(context.Background(), env, pub)
	if err != nil {
		t.Fatal(err)
	}
	want := Signature{KeyID: s.KeyID(), Manifest: manifestD, Report: reportD,
		Approval: Approval{Role: DefaultRole, Approver: "alice@host", Time: when, Purpose: "train"}}
	if !reflect.DeepEqual(*sig, want) {
		t.Fatalf("Open = %+v\nwant   %+v", *sig, want)
	}
	// ed25519 is deterministic and the payload canonical: the same approval
	// gives the same envelope bytes.
	if again := mustSign(t, s, manifestD, Approval{Approver: "alice@host", Time: when, Purpose: "train"}); !bytes.Equal(env, again) {
		t.Errorf("signing the same approval twice differs:\n%s\n%s", env, again)
	}
	if c, err := jcs.Canonicalize(env); err != nil || !bytes.Equal(c, env) {
		t.Errorf("envelope is not canonical JSON (%v):\n%s", err, env)
	}
}

// TestStatementJSON pins the statement's wire form: the type, the two
// subject names with sha256 digests, the predicate type and the predicate's
// field names, which other in-toto tools and docs/admission.md rely on.
func TestStatementJSON(t *testing.T) {
	s, _ := newKey(t, t.TempDir(), "k")
	env := mustSign(t, s, manifestD, Approval{Role: "data-owner", Approver: "bob", Time: when, Purpose: "eval"})
	var e struct {
		PayloadType string
		Payload     string
		Signatures  []struct{ KeyID, Sig string }
	}
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	if e.PayloadType != "application/vnd.in-toto+json" || len(e.Signatures) != 1 || e.Signatures[0].KeyID != s.KeyID() {
		t.Fatalf("envelope %s", env)
	}
	payload, err := base64.StdEncoding.DecodeString(e.Payload)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"_type":"https://in-toto.io/Statement/v1",` +
		`"predicate":{"approver":"bob","purpose":"eval","role":"data-owner","time":"2026-03-04T05:06:07Z"},` +
		`"predicateType":"https://pinfs.dev/approval/v1",` +
		`"subject":[{"digest":{"sha256":"` + manifestD.Hex() + `"},"name":"manifest"},` +
		`{"digest":{"sha256":"` + reportD.Hex() + `"},"name":"report"}]}`
	if string(payload) != want {
		t.Fatalf("statement\n%s\nwant\n%s", payload, want)
	}
}

// reenvelope returns env with its payload (and payload type) replaced but
// the original signatures kept: what an attacker who edits a stored
// envelope produces.
func reenvelope(t testing.TB, env []byte, edit func(payloadType string, payload []byte) (string, []byte)) []byte {
	t.Helper()
	var e dsse.Envelope
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	p, err := e.DecodeB64Payload()
	if err != nil {
		t.Fatal(err)
	}
	pt, p := edit(e.PayloadType, p)
	e.PayloadType, e.Payload = pt, base64.StdEncoding.EncodeToString(p)
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTamperedRefused(t *testing.T) {
	dir := t.TempDir()
	s, pubPath := newKey(t, dir, "alice")
	pub, _ := ParsePublicKey(readPub(t, pubPath))
	env := mustSign(t, s, manifestD, Approval{Time: when})
	for name, bad := range map[string][]byte{
		"manifest digest": reenvelope(t, env, func(pt string, p []byte) (string, []byte) {
			return pt, bytes.ReplaceAll(p, []byte(manifestD.Hex()), []byte(otherD.Hex()))
		}),
		"role": reenvelope(t, env, func(pt string, p []byte) (string, []byte) {
			return pt, bytes.ReplaceAll(p, []byte(`"approver"`), []byte(`"data-owner"`))
		}),
		"payload type": reenvelope(t, env, func(_ string, p []byte) (string, []byte) {
			return "application/json", p
		}),
	} {
		_, err := Open(context.Background(), bad, pub)
		if !errors.Is(err, ErrBadEnvelope) {
			t.Errorf("%s changed: Open = %v, want ErrBadEnvelope", name, err)
		}
	}
	if _, err := Open(context.Background(), env, pub); err != nil {
		t.Fatalf("the untouched envelope: %v", err)
	}
	bad := reenvelope(t, env, func(pt string, p []byte) (string, []byte) {
		return pt, bytes.ReplaceAll(p, []byte("2026"), []byte("2027"))
	})
	_, err := Open(context.Background(), bad, pub)
	if err == nil || !strings.Contains(err.Error(), "key "+s.KeyID()+": signature invalid") {
		t.Fatalf("tampered time: Open = %v, want a signature invalid error naming the key", err)
	}
}

func TestWrongKeyRefused(t *testing.T) {
	dir := t.TempDir()
	alice, _ := newKey(t, dir, "alice")
	_, bobPub := newKey(t, dir, "bob")
	pub, _ := ParsePublicKey(readPub(t, bobPub))
	_, err := Open(context.Background(), mustSign(t, alice, manifestD, Approval{Time: when}), pub)
	if !errors.Is(err, ErrBadEnvelope) || !strings.Contains(err.Error(), "signature invalid") {
		t.Fatalf("Open with another key = %v", err)
	}
}

// TestOpenRefusesOtherStatements: a validly signed payload that is not a
// pinfs approval statement is refused, whatever is wrong with it.
func TestOpenRefusesOtherStatements(t *testing.T) {
	s, _ := newKey(t, t.TempDir(), "k")
	good, err := statement(manifestD, reportD, Approval{Role: "approver", Time: when})
	if err != nil {
		t.Fatal(err)
	}
	subj := func(extra string) string {
		return `"subject":[{"name":"manifest","digest":{"sha256":"` + manifestD.Hex() + `"}}` + extra + `]`
	}
	rep := `,{"name":"report","digest":{"sha256":"` + reportD.Hex() + `"}}`
	pred := `"predicate":{"role":"approver","time":"2026-03-04T05:06:07Z"}`
	st := func(typ, ptype, subject, predicate string) string {
		return `{"_type":"` + typ + `","predicateType":"` + ptype + `",` + subject + `,` + predicate + `}`
	}
	const v1, pt = "https://in-toto.io/Statement/v1", PredicateType
	for name, payload := range map[string]string{
		"statement v0.1":     st("https://in-toto.io/Statement/v0.1", pt, subj(rep), pred),
		"predicate type":     st(v1, "https://slsa.dev/provenance/v1", subj(rep), pred),
		"no report":          st(v1, pt, subj(""), pred),
		"third subject":      st(v1, pt, subj(rep+`,{"name":"x","digest":{"sha256":"`+reportD.Hex()+`"}}`), pred),
		"report twice":       st(v1, pt, subj(rep+rep), pred),
		"sha512 digest":      st(v1, pt, subj(`,{"name":"report","digest":{"sha512":"`+reportD.Hex()+reportD.Hex()+`"}}`), pred),
		"unknown field":      st(v1, pt, subj(rep), `"predicate":{"role":"approver","time":"2026-03-04T05:06:07Z","scope":"all"}`),
		"no time":            st(v1, pt, subj(rep), `"predicate":{"role":"approver"}`),
		"not a statement":    `{"hello":"world"}`,
		"not json":           `hello`,
		"statement is valid": string(good), // the control: must be accepted
	} {
		es, _ := dsse.NewEnvelopeSigner(dsseSigner{priv: s.priv, id: s.id})
		env, err := es.SignPayload(context.Background(), PayloadType, []byte(payload))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(env)
		_, err = Open(context.Background(), b, s.Public())
		if name == "statement is valid" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if !errors.Is(err, ErrBadEnvelope) || !strings.Contains(err.Error(), "key "+s.KeyID()+": signed ") {
			t.Errorf("%s: Open = %v, want a refusal naming what the key signed", name, err)
		}
	}
}

func FuzzOpen(f *testing.F) {
	s, _ := newKey(f, f.TempDir(), "k")
	env := mustSign(f, s, manifestD, Approval{Time: when})
	f.Add(env)
	f.Add([]byte(`{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[{"keyid":"","sig":"AAAA"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sig, err := Open(context.Background(), data, s.Public())
		if err != nil {
			return
		}
		if _, err := verify.ParseDigest(string(sig.Manifest)); err != nil {
			t.Fatalf("accepted a statement with manifest %q", sig.Manifest)
		}
		if _, err := verify.ParseDigest(string(sig.Report)); err != nil {
			t.Fatalf("accepted a statement with report %q", sig.Report)
		}
	})
}

func TestGenerateRefusesOverwrite(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "alice")
	pub, key, err := Generate(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if pub != prefix+".pub" || key != prefix+".key" {
		t.Fatalf("Generate wrote %s and %s", pub, key)
	}
	for path, mode := range map[string]fs.FileMode{key: 0o600, pub: 0o644} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		// The umask can only take bits away; the key must never gain any.
		if got := fi.Mode().Perm(); got&^mode != 0 || path == key && got != 0o600 {
			t.Errorf("%s has mode %04o, want %04o", path, got, mode)
		}
	}
	before := readPub(t, key)
	if _, _, err := Generate(prefix); !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("Generate over an existing key = %v, want fs.ErrExist", err)
	}
	if !bytes.Equal(before, readPub(t, key)) {
		t.Fatal("Generate changed an existing key")
	}
	// Only the .pub exists: refused, and no .key is left behind.
	prefix2 := filepath.Join(dir, "bob")
	if err := os.WriteFile(prefix2+".pub", []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Generate(prefix2); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Generate over an existing .pub = %v", err)
	}
	if _, err := os.Stat(prefix2 + ".key"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed Generate left %s.key behind (%v)", prefix2, err)
	}
	if b := readPub(t, prefix2+".pub"); string(b) != "mine" {
		t.Fatalf("Generate changed an existing .pub: %q", b)
	}
}

func TestLoadSignerRefusesOpenModes(t *testing.T) {
	dir := t.TempDir()
	_, key, err := Generate(filepath.Join(dir, "k"))
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []fs.FileMode{0o644, 0o640, 0o604, 0o620} {
		if err := os.Chmod(key, mode); err != nil {
			t.Fatal(err)
		}
		_, err := LoadSigner(key)
		if err == nil || !strings.Contains(err.Error(), "group or others") || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("LoadSigner of a %04o key = %v, want a refusal saying why", mode, err)
		}
	}
	if err := os.Chmod(key, 0o400); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSigner(key); err != nil {
		t.Errorf("LoadSigner of a 0400 key: %v", err)
	}
	// A public key is not a signing key.
	pubAsKey := filepath.Join(dir, "pub.key")
	if err := os.WriteFile(pubAsKey, readPub(t, filepath.Join(dir, "k.pub")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSigner(pubAsKey); err == nil || !strings.Contains(err.Error(), `"PUBLIC KEY"`) {
		t.Errorf("LoadSigner of a public key = %v", err)
	}
}
