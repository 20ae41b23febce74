package admission

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfs/pinfs/cmd/internal/pin"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/gate"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

// gateStore is a store in which snapshots are pinned, approved and
// activated: both localstore.Store and s3store.Bucket are one.
type gateStore interface {
	store.Store
	store.Swapper
	store.KeyLister
}

// purpose is the manifest purpose of the snapshots the tests pin.
const purpose = "training"

// newLocal returns an empty local store.
func newLocal(t testing.TB) *localstore.Store {
	t.Helper()
	ls, err := localstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// keyring makes signing keys with sign.Generate in one directory and
// trust policies over them.
type keyring struct {
	t   testing.TB
	dir string
}

func newKeyring(t testing.TB) *keyring { return &keyring{t: t, dir: t.TempDir()} }

// signer generates the key pair dir/name.{key,pub} and loads its signer.
func (k *keyring) signer(name string) *sign.Signer {
	k.t.Helper()
	_, keyPath, err := sign.Generate(filepath.Join(k.dir, name))
	if err != nil {
		k.t.Fatal(err)
	}
	s, err := sign.LoadSigner(keyPath)
	if err != nil {
		k.t.Fatal(err)
	}
	return s
}

// policy writes a policy file that names the public key files of names
// (relative to the policy file) with threshold, and loads it.
func (k *keyring) policy(threshold int, names ...string) *sign.Policy {
	k.t.Helper()
	var pubs []string
	for _, n := range names {
		pubs = append(pubs, n+".pub")
	}
	b, err := json.Marshal(map[string]any{"approvers": pubs, "threshold": threshold})
	if err != nil {
		k.t.Fatal(err)
	}
	f, err := os.CreateTemp(k.dir, "policy-*.json")
	if err != nil {
		k.t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		k.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		k.t.Fatal(err)
	}
	p, err := sign.LoadPolicy(f.Name())
	if err != nil {
		k.t.Fatal(err)
	}
	return p
}

// at returns the pin options of a snapshot built at tombstone watermark tw
// and benchmark fence bf for purpose.
func at(tw, bf int64) pin.Options {
	return pin.Options{Purpose: purpose, TombstoneWatermark: int64p(tw), BenchmarkFence: int64p(bf), Jobs: 2}
}

// pinFiles writes files (path: content) into a new directory and pins it
// into st with o, the way pinfs pin DIR does.
func pinFiles(t testing.TB, st store.Store, o pin.Options, files map[string]string) verify.Digest {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := (&pin.Pinner{Store: st, Options: o}).Dir(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// validate validates d without a gate's fences, requires it to pass, and
// saves the report, which makes d VALIDATED. It returns the report digest.
func validate(t testing.TB, st store.Store, d verify.Digest) verify.Digest {
	t.Helper()
	r, err := Validate(t.Context(), st, d, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK {
		t.Fatalf("validate %s: %+v", d, r.Failures)
	}
	rd, err := Save(t.Context(), st, r)
	if err != nil {
		t.Fatal(err)
	}
	return rd
}

// approve signs d with each signer, each with the passing report of d the
// test saved last (d must be VALIDATED), and returns the envelopes'
// digests.
func approve(t testing.TB, st store.Store, d verify.Digest, signers ...*sign.Signer) []verify.Digest {
	t.Helper()
	passed, err := Validated(t.Context(), st, d)
	if err != nil || len(passed) == 0 {
		t.Fatalf("approve %s: no passing report (%v)", d, err)
	}
	var envs []verify.Digest
	for _, s := range signers {
		env, _, err := Approve(t.Context(), st, d, s, passed[0], nil, sign.Approval{Approver: "test"})
		if err != nil {
			t.Fatalf("approve %s with %s: %v", d, s.KeyID(), err)
		}
		envs = append(envs, env)
	}
	return envs
}

// approved pins files at o, validates the snapshot and has signers
// approve it.
func approved(t testing.TB, st store.Store, o pin.Options, files map[string]string, signers ...*sign.Signer) verify.Digest {
	t.Helper()
	d := pinFiles(t, st, o, files)
	validate(t, st, d)
	approve(t, st, d, signers...)
	return d
}

// head returns the current record of gate name.
func head(t testing.TB, st store.Blobs, name string) *gate.Record {
	t.Helper()
	g, err := gate.Open(st, name)
	if err != nil {
		t.Fatal(err)
	}
	r, err := g.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// history returns gate name's records, newest first (gate.Log, which
// fails on a gap or a fork).
func history(t testing.TB, st store.Blobs, name string) []*gate.Record {
	t.Helper()
	g, err := gate.Open(st, name)
	if err != nil {
		t.Fatal(err)
	}
	log, err := g.Log(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return log
}

// activate runs Activate and fails the test if it does not commit.
func activate(t testing.TB, st store.Store, a Activation) *gate.Record {
	t.Helper()
	r, err := Activate(t.Context(), st, a)
	if err != nil {
		t.Fatalf("activate %s in %s: %v", a.Digest, a.Gate, err)
	}
	return r
}

// fence runs Fence and fails the test if it does not commit.
func fence(t testing.TB, st store.Store, c FenceChange) *gate.Record {
	t.Helper()
	r, err := Fence(t.Context(), st, c)
	if err != nil {
		t.Fatalf("fence %s: %v", c.Gate, err)
	}
	return r
}

// state returns the lifecycle state StatusOf reports for d under p.
func state(t testing.TB, st store.Store, d verify.Digest, p *sign.Policy) string {
	t.Helper()
	s, err := StatusOf(t.Context(), st, d, p)
	if err != nil {
		t.Fatal(err)
	}
	return s.State
}
