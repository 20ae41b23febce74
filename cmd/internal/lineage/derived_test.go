package lineage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/derivations"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/derive"
)

// lineageStore is a local store holding two levels of derivations:
//
//	top  = train@v2(clean: mid, lost: lost, raw: raw)
//	mid  = clean@v1(raw: raw) and also clean@v1.1(raw: raw)
//	raw  pinned from s3://bucket/raw/ (manifest in the store)
//	lost not derived, manifest not in the store
type lineageStore struct {
	st                  *localstore.Store
	dir                 string
	raw, lost, mid, top verify.Digest
	a, a2, b            *derive.Record // mid's two records, top's record
}

func newLineageStore(t *testing.T) *lineageStore {
	t.Helper()
	dir := t.TempDir()
	st, err := localstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &lineageStore{st: st, dir: dir, lost: verify.SHA256([]byte("lost"))}
	s.raw = putManifest(t, st, "raw", verify.Source{ID: "raw", URI: "s3://bucket/raw/"})
	s.mid = putManifest(t, st, "mid")
	s.top = putManifest(t, st, "top")
	s.a = saveRecord(t, st, "clean@v1", []derive.Input{{Name: "raw", Digest: s.raw}}, nil, []string{"clean"}, s.mid)
	s.a2 = saveRecord(t, st, "clean@v1.1", []derive.Input{{Name: "raw", Digest: s.raw}}, nil, []string{"clean"}, s.mid)
	s.b = saveRecord(t, st, "train@v2",
		[]derive.Input{{Name: "raw", Digest: s.raw}, {Name: "clean", Digest: s.mid}, {Name: "lost", Digest: s.lost}},
		map[string]string{"seed": "1", "note": "a b"}, []string{"sh", "-c", "echo 'hi' > $PINFS_OUTPUT/x"}, s.top)
	if s.a.Key > s.a2.Key { // ByOutput sorts by key
		s.a, s.a2 = s.a2, s.a
	}
	return s
}

// putManifest stores a manifest with purpose and sources and returns its digest.
func putManifest(t *testing.T, st store.Blobs, purpose string, sources ...verify.Source) verify.Digest {
	t.Helper()
	m := &verify.Manifest{Purpose: purpose, Sources: sources,
		Members: verify.MembersRef{URI: verify.MembersURI(verify.SHA256([]byte(purpose))), Count: 1, Bytes: 1}}
	b, err := verify.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), verify.ManifestKey(m.SnapshotID), b); err != nil {
		t.Fatal(err)
	}
	return m.SnapshotID
}

func saveRecord(t *testing.T, st store.Blobs, v string, in []derive.Input, params map[string]string, cmd []string, out verify.Digest) *derive.Record {
	t.Helper()
	r, err := derive.New(in, v, params, cmd, "dir")
	if err != nil {
		t.Fatal(err)
	}
	r.Output, r.Time = out, "2026-12-01T13:40:00Z"
	saved, err := derivations.Save(context.Background(), st, r)
	if err != nil {
		t.Fatal(err)
	}
	return saved
}

func TestDerivedTwoLevels(t *testing.T) {
	s := newLineageStore(t)
	rs := StoreRecords(s.st)
	n, err := Derived(context.Background(), rs, s.top)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteDerived(&buf, n); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`output %s
  derivation %s
    transform train@v2
    time      2026-12-01T13:40:00Z
    command   sh -c 'echo '\''hi'\'' > $PINFS_OUTPUT/x'
    params    note='a b' seed=1
    split     dir
    input clean: %s
      derivation %s
        transform %s
        time      2026-12-01T13:40:00Z
        command   clean
        params    (none)
        split     dir
        input raw: %s
          not derived; pinned from s3://bucket/raw/
      derivation %s
        transform %s
        time      2026-12-01T13:40:00Z
        command   clean
        params    (none)
        split     dir
        input raw: %s
          shown above
    input lost: %s
      not derived; its manifest is not in the store
    input raw: %s
      shown above
`, s.top, s.b.Key, s.mid, s.a.Key, s.a.Transform, s.raw, s.a2.Key, s.a2.Transform, s.raw, s.lost, s.raw)
	if got := buf.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if n.Unreadable() {
		t.Error("Unreadable with only a missing manifest")
	}
	// By key: the one record, with the same lineage below it.
	k, err := Derived(context.Background(), rs, s.b.Key)
	if err != nil {
		t.Fatal(err)
	}
	var kbuf bytes.Buffer
	if err := WriteDerived(&kbuf, k); err != nil {
		t.Fatal(err)
	}
	if kbuf.String() != want {
		t.Errorf("by key:\n%s\nwant\n%s", kbuf.String(), want)
	}
	// The key of a record deeper down shows only that record of mid.
	k, err = Derived(context.Background(), rs, s.a2.Key)
	if err != nil {
		t.Fatal(err)
	}
	if k.Digest != s.mid || len(k.Derivations) != 1 || k.Derivations[0].Record.Key != s.a2.Key ||
		k.Derivations[0].Inputs[0].Node.Kind != KindNotDerived {
		t.Errorf("by key %s: %+v", s.a2.Key, k)
	}
}

func TestDerivedJSON(t *testing.T) {
	s := newLineageStore(t)
	n, err := Derived(context.Background(), StoreRecords(s.st), s.top)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	type node struct {
		Digest      verify.Digest `json:"digest"`
		Kind        string        `json:"kind"`
		Manifest    string        `json:"manifest"`
		Sources     []struct{ ID, URI string }
		Derivations []struct {
			Record struct {
				Key       verify.Digest     `json:"key"`
				Output    verify.Digest     `json:"output"`
				Transform string            `json:"transform"`
				Params    map[string]string `json:"params"`
				Command   []string          `json:"command"`
			} `json:"record"`
			Inputs []struct {
				Name string          `json:"name"`
				Node json.RawMessage `json:"node"`
			} `json:"inputs"`
		} `json:"derivations"`
	}
	decode := func(raw []byte) (x node) {
		if err := json.Unmarshal(raw, &x); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return x
	}
	top := decode(b)
	if top.Digest != s.top || top.Kind != "derived" || len(top.Derivations) != 1 {
		t.Fatalf("top: %s", b)
	}
	d := top.Derivations[0]
	if d.Record.Key != s.b.Key || d.Record.Output != s.top || d.Record.Transform != "train@v2" ||
		d.Record.Params["note"] != "a b" || len(d.Record.Command) != 3 || len(d.Inputs) != 3 {
		t.Fatalf("top derivation: %s", b)
	}
	clean, lost, raw := decode(d.Inputs[0].Node), decode(d.Inputs[1].Node), decode(d.Inputs[2].Node)
	if d.Inputs[0].Name != "clean" || clean.Digest != s.mid || clean.Kind != "derived" || len(clean.Derivations) != 2 {
		t.Errorf("input clean: %s", d.Inputs[0].Node)
	}
	if d.Inputs[1].Name != "lost" || lost.Digest != s.lost || lost.Kind != "not-derived" || lost.Manifest != "missing" {
		t.Errorf("input lost: %s", d.Inputs[1].Node)
	}
	if d.Inputs[2].Name != "raw" || raw.Digest != s.raw || raw.Kind != "seen" || raw.Derivations != nil {
		t.Errorf("input raw: %s", d.Inputs[2].Node)
	}
	pinned := decode(clean.Derivations[0].Inputs[0].Node)
	if pinned.Digest != s.raw || pinned.Kind != "not-derived" || pinned.Manifest != "read" ||
		len(pinned.Sources) != 1 || pinned.Sources[0].URI != "s3://bucket/raw/" {
		t.Errorf("raw below clean: %s", clean.Derivations[0].Inputs[0].Node)
	}
	// The document has exactly the fields documented for a node.
	var fields map[string]any
	if err := json.Unmarshal(d.Inputs[1].Node, &fields); err != nil {
		t.Fatal(err)
	}
	if len(fields) != 3 {
		t.Errorf("not-derived node with a missing manifest has fields %v, want digest, kind, manifest", fields)
	}
}

func TestDerivedNoRecord(t *testing.T) {
	s := newLineageStore(t)
	for _, d := range []verify.Digest{s.raw, verify.SHA256([]byte("unknown"))} {
		_, err := Derived(context.Background(), StoreRecords(s.st), d)
		if !errors.Is(err, derivations.ErrNoRecord) || !strings.Contains(err.Error(), string(d)) {
			t.Errorf("Derived(%s) = %v, want ErrNoRecord naming it", d, err)
		}
	}
}

func TestDerivedTampered(t *testing.T) {
	s := newLineageStore(t)
	tamper := func(key string) {
		t.Helper()
		p := filepath.Join(s.dir, filepath.FromSlash(key))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.Replace(b, []byte(`"params":{}`), []byte(`"params":{"x":"y"}`), 1)
		b = bytes.Replace(b, []byte(`"seed":"1"`), []byte(`"seed":"2"`), 1)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A record below the top, read through the output index.
	tamper("derivations/outputs/sha256/" + s.mid.Hex() + "/" + s.a.Key.Hex())
	_, err := Derived(context.Background(), StoreRecords(s.st), s.top)
	if !errors.Is(err, derive.ErrInvalid) || !strings.Contains(err.Error(), s.a.Key.Hex()) {
		t.Errorf("tampered record below: %v, want ErrInvalid naming %s", err, s.a.Key)
	}
	// The top record, asked for by key.
	tamper(derivations.KeyOf(s.b.Key))
	_, err = Derived(context.Background(), StoreRecords(s.st), s.b.Key)
	if !errors.Is(err, derive.ErrInvalid) || !strings.Contains(err.Error(), s.b.Key.Hex()) {
		t.Errorf("tampered top record: %v, want ErrInvalid naming %s", err, s.b.Key)
	}
}

// fakeRecords is an in-memory Records: records by output, manifests by
// digest, and errors to return for some digests.
type fakeRecords struct {
	byOutput  map[verify.Digest][]*derive.Record
	manifests map[verify.Digest]*verify.Manifest
	errs      map[verify.Digest]error // returned by Manifest
	lookups   int                     // ByOutput calls
}

func (f *fakeRecords) Find(ctx context.Context, d verify.Digest) ([]*derive.Record, error) {
	for _, rs := range f.byOutput {
		for _, r := range rs {
			if r.Key == d {
				return []*derive.Record{r}, nil
			}
		}
	}
	if rs, _ := f.ByOutput(ctx, d); len(rs) > 0 {
		return rs, nil
	}
	return nil, fmt.Errorf("%w for %s", derivations.ErrNoRecord, d)
}

func (f *fakeRecords) ByOutput(_ context.Context, d verify.Digest) ([]*derive.Record, error) {
	f.lookups++
	return f.byOutput[d], nil
}

func (f *fakeRecords) Manifest(_ context.Context, d verify.Digest) (*verify.Manifest, error) {
	if err := f.errs[d]; err != nil {
		return nil, err
	}
	if m, ok := f.manifests[d]; ok {
		return m, nil
	}
	return nil, fmt.Errorf("manifest %s: %w", d, store.ErrNotFound)
}

func digestN(i int) verify.Digest { return verify.SHA256(fmt.Appendf(nil, "snapshot %d", i)) }

// chain returns fake records where digestN(i) is derived from digestN(i+1), for i < n.
func chain(t *testing.T, n int) *fakeRecords {
	t.Helper()
	f := &fakeRecords{byOutput: map[verify.Digest][]*derive.Record{}}
	for i := range n {
		r, err := derive.New([]derive.Input{{Name: "in", Digest: digestN(i + 1)}}, fmt.Sprintf("step@v%d", i), nil, []string{"step"}, "dir")
		if err != nil {
			t.Fatal(err)
		}
		r.Output, r.Time = digestN(i), "2026-12-01T13:40:00Z"
		f.byOutput[r.Output] = []*derive.Record{r}
	}
	return f
}

func TestDerivedDepthLimit(t *testing.T) {
	f := chain(t, MaxDepth+10)
	n, err := Derived(context.Background(), f, digestN(0))
	if err != nil {
		t.Fatal(err)
	}
	depth := 0
	for n.Kind == KindDerived {
		n = n.Derivations[0].Inputs[0].Node
		depth++
	}
	if depth != MaxDepth || n.Kind != KindDepth || n.Digest != digestN(MaxDepth) {
		t.Errorf("walk stopped at depth %d with a %s node for %s, want %d, %s, %s", depth, n.Kind, n.Digest, MaxDepth, KindDepth, digestN(MaxDepth))
	}
	if f.lookups != MaxDepth {
		t.Errorf("%d lookups by output, want %d", f.lookups, MaxDepth)
	}
	// A chain shorter than the limit ends in a not-derived input.
	n, err = Derived(context.Background(), chain(t, 3), digestN(0))
	if err != nil {
		t.Fatal(err)
	}
	for n.Kind == KindDerived {
		n = n.Derivations[0].Inputs[0].Node
	}
	if n.Kind != KindNotDerived || n.Digest != digestN(3) || n.Manifest != ManifestMissing {
		t.Errorf("end of a short chain: %+v", n)
	}
}

func TestDerivedUnreadableManifest(t *testing.T) {
	f := chain(t, 1)
	f.errs = map[verify.Digest]error{digestN(1): fmt.Errorf("manifest %s: %w", digestN(1), verify.ErrInvalid)}
	n, err := Derived(context.Background(), f, digestN(0))
	if err != nil {
		t.Fatal(err)
	}
	in := n.Derivations[0].Inputs[0].Node
	if in.Manifest != ManifestUnreadable || !strings.Contains(in.Error, "invalid snapshot") || !n.Unreadable() {
		t.Errorf("input with a bad manifest: %+v", in)
	}
	var buf bytes.Buffer
	if err := WriteDerived(&buf, n); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "not derived; its manifest cannot be read: manifest "+string(digestN(1))) {
		t.Errorf("text:\n%s", buf.String())
	}
	// A cancelled walk is an error, not a tree.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Derived(ctx, chain(t, 2), digestN(0)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled walk: %v", err)
	}
}

func TestDerivedRecordForAnotherOutput(t *testing.T) {
	f := chain(t, 2)
	f.byOutput[digestN(1)] = f.byOutput[digestN(0)] // a store that answers with the wrong record
	if _, err := Derived(context.Background(), f, digestN(0)); err == nil || !strings.Contains(err.Error(), string(f.byOutput[digestN(0)][0].Key)) {
		t.Errorf("record under another output: %v", err)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"harvest":         "harvest",
		"--lang=en":       "--lang=en",
		"a/b.c@v1:2,3%+_": "a/b.c@v1:2,3%+_",
		"":                "''",
		"a b":             "'a b'",
		"it's":            `'it'\''s'`,
		"$HOME":           "'$HOME'",
		"ünï":             "'ünï'",
		"a\nb":            `$'a\nb'`,
		"\x1b[2J'":        `$'\x1b[2J\''`,
		"\xff":            `$'\xff'`,
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
	if got := params(map[string]string{"b": "2", "a": "x y"}); got != "a='x y' b=2" {
		t.Errorf("params = %s", got)
	}
}
