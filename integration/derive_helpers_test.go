package integration

// The fixture of the pinfs derive tests (derive_test.go): a store (local
// directory or versitygw), a raw input directory pinned into it, a shell
// transform that counts its runs, and the checks every derive ends with:
// no mount left behind and no work directory left over.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/fs/mountinfo"
	"github.com/pinfs/pinfs/integration/fusetest"
	"github.com/pinfs/pinfs/integration/s3test"
	"github.com/pinfs/pinfs/verify/jcs"
)

// deriveStore is one store kind the derive tests run on.
type deriveStore struct {
	env   []string
	store string                                // --store
	get   func(t testing.TB, key string) []byte // a store key's bytes
	put   func(t testing.TB, key string, b []byte)
}

// eachDeriveStore runs f on a fresh local directory store and a fresh S3
// store on versitygw.
func eachDeriveStore(t *testing.T, f func(t *testing.T, ds *deriveStore)) {
	for _, kind := range []struct {
		name string
		new  func(*testing.T) *deriveStore
	}{{"local", localDeriveStore}, {"s3", s3DeriveStore}} {
		t.Run(kind.name, func(t *testing.T) { f(t, kind.new(t)) })
	}
}

func localDeriveStore(t *testing.T) *deriveStore {
	st := filepath.Join(t.TempDir(), "store")
	return &deriveStore{store: st, get: func(t testing.TB, key string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(st, filepath.FromSlash(key)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}, put: func(t testing.TB, key string, b []byte) {
		t.Helper()
		writeFile(t, filepath.Join(st, filepath.FromSlash(key)), string(b))
	}}
}

func s3DeriveStore(t *testing.T) *deriveStore {
	s := s3test.Start(t)
	s.CreateBucket(t, "store", true)
	return &deriveStore{env: s.Env(), store: "s3://store/pinfs",
		get: func(t testing.TB, key string) []byte { return s.Get(t, "store", "pinfs/"+key, "") },
		put: func(t testing.TB, key string, b []byte) { s.Put(t, "store", "pinfs/"+key, b) }}
}

// deriveFix is one derive test's world: a store, the raw input pinned into
// it, a cache dir, a work dir and a transform script that appends a line to
// counter at every run.
type deriveFix struct {
	*deriveStore
	root    string            // everything of the test; no mount may remain under it
	raw     string            // digest of the pinned raw input
	data    map[string][]byte // the raw input's files
	cache   string            // --cache-dir
	work    string            // --work-dir
	counter string            // one line per run of a transform script
}

// newDeriveFix pins a small raw input (one file > 64 KiB, so it has an
// outboard) into ds. Anything still mounted under the test's directories
// when it ends is force-unmounted, so a failure never leaves a dead mount.
func newDeriveFix(t *testing.T, ds *deriveStore) *deriveFix {
	t.Helper()
	fusetest.Require(t)
	root := t.TempDir()
	t.Cleanup(func() { // runs before root is removed
		for _, m := range mountsUnder(root) {
			t.Errorf("still mounted at the end: %s", m)
			fusetest.ForceUnmount(t, m)
		}
	})
	f := &deriveFix{deriveStore: ds, root: root, cache: filepath.Join(root, "cache"),
		work: filepath.Join(root, "work"), counter: filepath.Join(root, "runs"),
		data: map[string][]byte{
			"a.txt":     []byte("alpha\n"),
			"sub/b.txt": []byte("bravo\n"),
			"big.bin":   randomBytes(t, 100_000),
		}}
	src := filepath.Join(root, "rawdata")
	for rel, b := range f.data {
		writeFile(t, filepath.Join(src, filepath.FromSlash(rel)), string(b))
	}
	if err := os.MkdirAll(f.work, 0o755); err != nil {
		t.Fatal(err)
	}
	f.raw = mustPinfs(t, ds.env, "pin", src, "--store", ds.store).lastLine()
	return f
}

func writeFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// script writes a transform script at root/name (replacing an earlier
// one): it first counts the run, then runs body under set -eu, with
// @WORK@ replaced by the work dir.
func (f *deriveFix) script(t testing.TB, name, body string) string {
	t.Helper()
	p := filepath.Join(f.root, name)
	body = strings.ReplaceAll(body, "@WORK@", f.work)
	writeFile(t, p, "#!/bin/sh\nset -eu\necho run >> '"+f.counter+"'\n"+body)
	return p
}

// runs is how many times a transform script ran.
func (f *deriveFix) runs(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile(f.counter)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// derive runs pinfs derive with args after the store, cache and work
// flags, wants exit code and every string of want in its output, and then
// checks that nothing is left mounted or in the work dir.
func (f *deriveFix) derive(t testing.TB, code int, want []string, args ...string) result {
	t.Helper()
	r := wantExit(t, f.env, code, want,
		append([]string{"derive", "--store", f.store, "--cache-dir", f.cache, "--work-dir", f.work}, args...)...)
	f.checkClean(t)
	return r
}

// checkClean fails the test when a mount remains under the test's
// directories or a pinfs-derive-* work dir was left behind.
func (f *deriveFix) checkClean(t testing.TB) {
	t.Helper()
	if ms := mountsUnder(f.root); len(ms) > 0 {
		t.Errorf("mounts left after pinfs exited: %q", ms)
	}
	left, err := os.ReadDir(f.work)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left in the work dir after pinfs exited: %s", e.Name())
	}
}

// mountsUnder lists the mount points in /proc/self/mountinfo at or below
// dir, deepest first. It never stats them.
func mountsUnder(dir string) []string {
	all, err := mountinfo.All(mountinfo.Self)
	if err != nil {
		return []string{"reading the mount table: " + err.Error()}
	}
	var out []string
	for _, m := range all {
		if m.Point == dir || strings.HasPrefix(m.Point, dir+"/") {
			out = append(out, m.Point)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// deriveRecord is a derivation record as the contract spells it.
type deriveRecord struct {
	Schema    string            `json:"schema"`
	Key       string            `json:"key"`
	Inputs    []deriveInput     `json:"inputs"`
	Transform string            `json:"transform"`
	Params    map[string]string `json:"params"`
	Command   []string          `json:"command"`
	Split     string            `json:"split"`
	Output    string            `json:"output"`
	Time      string            `json:"time"`
}

type deriveInput struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// readRecord reads a --record file: canonical JSON plus "\n", exactly the
// contract's fields, and a key that is the SHA-256 of the canonical record
// without key, output and time.
func readRecord(t testing.TB, p string) deriveRecord {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	body, ok := bytes.CutSuffix(b, []byte("\n"))
	if c, err := jcs.Canonicalize(body); !ok || err != nil || !bytes.Equal(c, body) {
		t.Errorf("record file %s is not canonical JSON plus a newline (%v):\n%s", p, err, b)
	}
	var r deriveRecord
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("record file %s: %v:\n%s", p, err, b)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	delete(doc, "key")
	delete(doc, "output")
	delete(doc, "time")
	c, err := jcs.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(c); r.Key != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("record key %s is not the SHA-256 of the record without key, output and time", r.Key)
	}
	return r
}

// deriveManifest is the part of a manifest the derive tests look at.
type deriveManifest struct {
	Parents   []string `json:"parents"`
	Transform string   `json:"transform"`
	Sources   []struct {
		URI string `json:"uri"`
	} `json:"sources"`
}

// manifest reads the manifest of digest d from the store.
func (f *deriveFix) manifest(t testing.TB, d string) deriveManifest {
	t.Helper()
	var m deriveManifest
	if err := json.Unmarshal(f.get(t, "manifests/sha256/"+strings.TrimPrefix(d, "sha256:")), &m); err != nil {
		t.Fatalf("manifest %s: %v", d, err)
	}
	return m
}

// members returns the member paths of snapshot d and their BLAKE3
// digests, from pinfs ls.
func (f *deriveFix) members(t testing.TB, d string) map[string]string {
	t.Helper()
	out := map[string]string{}
	lines := strings.Split(strings.TrimSpace(mustPinfs(t, f.env, "ls", d, "--store", f.store, "--long").stdout), "\n")
	for _, l := range lines[1:] { // SIZE SPLIT DIGEST SOURCE VERSION PATH
		fs := strings.Fields(l)
		if len(fs) != 6 {
			t.Fatalf("pinfs ls %s: line %q", d, l)
		}
		out[fs[5]] = fs[2]
	}
	return out
}

// isDigest reports whether s is a full sha256:<64 hex> digest.
func isDigest(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	_, err := hex.DecodeString(h)
	return ok && len(h) == 64 && err == nil && strings.ToLower(h) == h
}
