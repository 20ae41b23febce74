package verify_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/jcs"
)

// buildSnapshot encodes ms, builds a manifest that names the table (after
// f, if not nil, adjusts it) and returns the manifest, its bytes and the
// table.
func buildSnapshot(t testing.TB, ms []verify.Member, f func(m *verify.Manifest)) (*verify.Manifest, []byte, []byte) {
	t.Helper()
	table := encode(t, ms)
	var total int64
	for _, m := range ms {
		total += m.Size
	}
	m := &verify.Manifest{
		Parents:     []verify.Digest{verify.SHA256([]byte("parent"))},
		Sources:     []verify.Source{{ID: "main", URI: "s3://bucket/data/", Listing: verify.SHA256([]byte("listing"))}},
		SplitPolicy: "dir:test,train,val",
		Purpose:     "unit test",
		Members:     verify.MembersRef{URI: verify.MembersURI(verify.SHA256(table)), Count: int64(len(ms)), Bytes: total},
	}
	if f != nil {
		f(m)
	}
	b, err := verify.Build(m)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return m, b, table
}

// digestOf returns the snapshotId written in manifest bytes b.
func digestOf(t testing.TB, b []byte) verify.Digest {
	t.Helper()
	var v struct {
		SnapshotID string `json:"snapshotId"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	d, err := verify.ParseDigest(v.SnapshotID)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// seal applies the digest rule to doc with crypto/sha256 and the general
// JCS encoder (not Build), so tests can make manifests that Build would
// never write but whose digest is right.
func seal(t testing.TB, doc map[string]any) ([]byte, verify.Digest) {
	t.Helper()
	payload := map[string]any{}
	for k, v := range doc {
		if k != "snapshotId" && k != "envelope" {
			payload[k] = v
		}
	}
	p, err := jcs.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(p)
	d := verify.Digest("sha256:" + hex.EncodeToString(sum[:]))
	full := map[string]any{"snapshotId": d}
	for k, v := range doc {
		full[k] = v
	}
	b, err := jcs.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	return b, d
}

// minimalDoc is the smallest manifest document the format allows.
func minimalDoc() map[string]any {
	return map[string]any{
		"schema":  verify.Schema,
		"members": map[string]any{"uri": verify.MembersURI(verify.SHA256(nil)), "count": 0, "bytes": 0},
	}
}

func TestBuildParseRoundTrip(t *testing.T) {
	ms := []verify.Member{casMember("a"), s3Member("b")}
	wm, fence := int64(42), int64(1<<53-1)
	m, b, _ := buildSnapshot(t, ms, func(m *verify.Manifest) {
		m.SnapshotID = "junk, replaced by Build"
		m.Schema = "junk, replaced by Build"
		m.Sources = append(m.Sources, verify.Source{ID: "dir", URI: "file:///data"})
		m.TombstoneWatermark, m.BenchmarkFence = &wm, &fence
		m.RecordSchema, m.SelectionPolicy, m.Transform = "sha256:rs", "sha256:sp", "registry/harvest@sha256:x"
		m.Extra = map[string]json.RawMessage{"x-future": json.RawMessage(`{"a":[1,"<>"]}`)}
	})
	if m.Schema != verify.Schema {
		t.Errorf("Build set schema %q", m.Schema)
	}
	if d := digestOf(t, b); m.SnapshotID != d {
		t.Errorf("Build set SnapshotID %s, wrote %s", m.SnapshotID, d)
	}
	if c, err := jcs.Canonicalize(b); err != nil || !bytes.Equal(c, b) {
		t.Errorf("Build output is not canonical:\n%s\n%s", b, c)
	}
	got, err := verify.ParseManifest(m.SnapshotID, b)
	if err != nil {
		t.Fatalf("ParseManifest: %v", err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, m)
	}
	// Building the parsed manifest again gives the same bytes.
	again, err := verify.Build(got)
	if err != nil || !bytes.Equal(again, b) {
		t.Errorf("Build(ParseManifest(b)) = %s, %v; want %s", again, err, b)
	}
	// The digest rule, applied without Build: sha256 of the JCS form of the
	// document without snapshotId.
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if _, d := seal(t, doc); d != m.SnapshotID {
		t.Errorf("digest rule gives %s, Build %s", d, m.SnapshotID)
	}
}

func TestBuildDeterministic(t *testing.T) {
	ms := []verify.Member{casMember("a")}
	_, b1, _ := buildSnapshot(t, ms, nil)
	_, b2, _ := buildSnapshot(t, ms, nil)
	if !bytes.Equal(b1, b2) {
		t.Fatalf("two builds differ:\n%s\n%s", b1, b2)
	}
	_, b3, _ := buildSnapshot(t, ms, func(m *verify.Manifest) { m.Purpose = "other" })
	if digestOf(t, b3) == digestOf(t, b1) {
		t.Fatal("a different purpose gives the same digest")
	}
}

func TestUnknownFieldsKept(t *testing.T) {
	ms := []verify.Member{casMember("a")}
	_, plain, _ := buildSnapshot(t, ms, nil)
	digests := map[verify.Digest]string{digestOf(t, plain): "none"}
	for _, extra := range []string{`"a"`, `"b"`, `{"k":1}`, `null`} {
		m, b, _ := buildSnapshot(t, ms, func(m *verify.Manifest) {
			m.Extra = map[string]json.RawMessage{"x-note": json.RawMessage(extra)}
		})
		if !bytes.Contains(b, []byte(`"x-note":`+extra)) {
			t.Errorf("extra field %s not written: %s", extra, b)
		}
		if prev, dup := digests[m.SnapshotID]; dup {
			t.Errorf("extra %s has the digest of extra %s", extra, prev)
		}
		digests[m.SnapshotID] = extra
		got, err := verify.ParseManifest(m.SnapshotID, b)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Extra["x-note"]) != extra || len(got.Extra) != 1 {
			t.Errorf("ParseManifest kept %q", got.Extra)
		}
	}
	// Extra values are stored canonically.
	m, b, _ := buildSnapshot(t, ms, func(m *verify.Manifest) {
		m.Extra = map[string]json.RawMessage{"x": json.RawMessage(`{ "b" : 1.0, "a" : "\u0041" }`)}
	})
	if !bytes.Contains(b, []byte(`"x":{"a":"A","b":1}`)) {
		t.Errorf("extra not canonical: %s", b)
	}
	if _, err := verify.ParseManifest(m.SnapshotID, b); err != nil {
		t.Error(err)
	}
	// An extra field may not be, or pass for, a known field.
	for _, k := range []string{"purpose", "envelope", "snapshotId", "Purpose", "SCHEMA", "ſplitPolicy", "tombstoneWatermar\u212a"} {
		m := &verify.Manifest{Members: verify.MembersRef{URI: verify.MembersURI(verify.SHA256(nil))},
			Extra: map[string]json.RawMessage{k: json.RawMessage(`"x"`)}}
		if b, err := verify.Build(m); err == nil {
			t.Errorf("Build with extra field %q = %s", k, b)
		}
	}
}

func TestEnvelopeExcluded(t *testing.T) {
	_, b, _ := buildSnapshot(t, []verify.Member{casMember("a")}, nil)
	d := digestOf(t, b)
	if !bytes.HasPrefix(b, []byte(`{"members":`)) {
		t.Fatalf("unexpected first field: %s", b)
	}
	for _, env := range []string{`{}`, `{"sig":"abc"}`, `{"builtAt":"2026-01-01T00:00:00Z","host":"x"}`, `"anything"`} {
		// "envelope" sorts first, so inserting it there keeps b canonical.
		withEnv := append([]byte(`{"envelope":`+env+`,`), b[1:]...)
		m, err := verify.ParseManifest(d, withEnv)
		if err != nil {
			t.Errorf("envelope %s: %v", env, err)
			continue
		}
		if m.SnapshotID != d || m.Extra != nil {
			t.Errorf("envelope %s: snapshotId %s, extra %q", env, m.SnapshotID, m.Extra)
		}
	}
	// In a non-canonical position it is refused like any other change.
	withEnv := append(bytes.Clone(b[:len(b)-1]), `,"envelope":{}}`...)
	if _, err := verify.ParseManifest(d, withEnv); !errors.Is(err, verify.ErrInvalid) {
		t.Errorf("envelope at the end: %v", err)
	}
}

// TestParseManifestRefusesAnyFlippedByte changes each byte of a stored
// manifest in turn (three different bit flips each): every change must be
// refused with an error wrapping ErrInvalid.
func TestParseManifestRefusesAnyFlippedByte(t *testing.T) {
	_, b, _ := buildSnapshot(t, []verify.Member{casMember("a"), s3Member("b")}, nil)
	d := digestOf(t, b)
	if _, err := verify.ParseManifest(d, b); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		for _, mask := range []byte{0x01, 0x20, 0x80} {
			bad := bytes.Clone(b)
			bad[i] ^= mask
			if _, err := verify.ParseManifest(d, bad); !errors.Is(err, verify.ErrInvalid) {
				t.Fatalf("byte %d (%q) ^ %#x accepted (%v):\n%s", i, b[i], mask, err, bad)
			}
		}
	}
	// Truncated or extended bytes too.
	for _, bad := range [][]byte{b[:len(b)-1], append(bytes.Clone(b), ' '), append(bytes.Clone(b), '\n'), nil} {
		if _, err := verify.ParseManifest(d, bad); !errors.Is(err, verify.ErrInvalid) {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
}

func TestParseManifestRefuses(t *testing.T) {
	_, good, _ := buildSnapshot(t, []verify.Member{casMember("a")}, nil)
	_, other, _ := buildSnapshot(t, []verify.Member{casMember("b")}, nil)
	if _, err := verify.ParseManifest(digestOf(t, other), good); !errors.Is(err, verify.ErrInvalid) {
		t.Errorf("manifest under another manifest's digest: %v", err)
	}
	var indented bytes.Buffer
	json.Indent(&indented, good, "", " ")
	if _, err := verify.ParseManifest(digestOf(t, good), indented.Bytes()); !errors.Is(err, verify.ErrInvalid) {
		t.Errorf("indented manifest: %v", err)
	}

	edit := func(f func(doc map[string]any)) map[string]any {
		doc := minimalDoc()
		f(doc)
		return doc
	}
	members := func(doc map[string]any) map[string]any { return doc["members"].(map[string]any) }
	if b, d := seal(t, minimalDoc()); true {
		if _, err := verify.ParseManifest(d, b); err != nil {
			t.Fatalf("minimal manifest refused: %v", err)
		}
	}
	for name, doc := range map[string]map[string]any{
		"schema v2":             edit(func(doc map[string]any) { doc["schema"] = "pinfs.manifest.v2" }),
		"no schema":             edit(func(doc map[string]any) { delete(doc, "schema") }),
		"schema in capitals":    edit(func(doc map[string]any) { doc["SCHEMA"] = doc["schema"]; delete(doc, "schema") }),
		"schema with long s":    edit(func(doc map[string]any) { doc["ſchema"] = doc["schema"]; delete(doc, "schema") }),
		"second split policy":   edit(func(doc map[string]any) { doc["splitPolicy"] = "none"; doc["ſplitPolicy"] = "dir:x" }),
		"second fence (Kelvin)": edit(func(doc map[string]any) { doc["benchmar\u212aFence"] = 7 }),
		"case variant purpose":  edit(func(doc map[string]any) { doc["Purpose"] = "x" }),
		"bad parent":            edit(func(doc map[string]any) { doc["parents"] = []string{"latest"} }),
		"upper-case parent":     edit(func(doc map[string]any) { doc["parents"] = []string{strings.ToUpper(string(verify.SHA256(nil)))} }),
		"no members":            edit(func(doc map[string]any) { delete(doc, "members") }),
		"members uri not cas":   edit(func(doc map[string]any) { members(doc)["uri"] = "s3://b/members.jsonl" }),
		"members uri short":     edit(func(doc map[string]any) { members(doc)["uri"] = "cas://sha256/abc" }),
		"negative count":        edit(func(doc map[string]any) { members(doc)["count"] = -1 }),
		"negative bytes":        edit(func(doc map[string]any) { members(doc)["bytes"] = -1 }),
		"fractional count":      edit(func(doc map[string]any) { members(doc)["count"] = 1.5 }),
		"count as string":       edit(func(doc map[string]any) { members(doc)["count"] = "0" }),
		"parents not an array":  edit(func(doc map[string]any) { doc["parents"] = "sha256:x" }),
		"nested unknown field":  edit(func(doc map[string]any) { members(doc)["extra"] = 1 }),
		"nested long-s field":   edit(func(doc map[string]any) { members(doc)["byteſ"] = 5 }),
		"empty purpose":         edit(func(doc map[string]any) { doc["purpose"] = "" }),
		"null watermark":        edit(func(doc map[string]any) { doc["tombstoneWatermark"] = nil }),
		"source listing": edit(func(doc map[string]any) {
			doc["sources"] = []any{map[string]any{"id": "s", "uri": "s3://b/", "listing": "latest"}}
		}),
		"source unknown field": edit(func(doc map[string]any) { doc["sources"] = []any{map[string]any{"id": "s", "uri": "s3://b/", "x": 1}} }),
	} {
		b, d := seal(t, doc)
		if m, err := verify.ParseManifest(d, b); !errors.Is(err, verify.ErrInvalid) {
			t.Errorf("%s: ParseManifest = %+v, %v; want ErrInvalid\n%s", name, m, err, b)
		}
	}
	for name, b := range map[string]string{
		"array": `[]`, "string": `"x"`, "empty": ``, "null": `null`,
	} {
		if _, err := verify.ParseManifest(verify.SHA256([]byte(b)), []byte(b)); !errors.Is(err, verify.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestCheckRefusesBadTable: the member table is bound to the manifest by
// its digest, and its count and byte total are checked too.
func TestCheckRefusesBadTable(t *testing.T) {
	ms := []verify.Member{casMember("a"), s3Member("b"), casMember("c")}
	m, mb, table := buildSnapshot(t, ms, nil)
	c, err := verify.Check(m.SnapshotID, mb, table)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Problems) != 0 || !reflect.DeepEqual(c.Table.Members(), ms) {
		t.Fatalf("Check = %+v", c)
	}
	s, err := c.Snapshot()
	if err != nil || s.Digest() != m.SnapshotID || !reflect.DeepEqual(s.Members(), ms) || s.Manifest().Purpose != m.Purpose {
		t.Fatalf("Snapshot() = %+v, %v", s, err)
	}

	refused := func(name string, d verify.Digest, mb, table []byte) {
		t.Helper()
		if c, err := verify.Check(d, mb, table); !errors.Is(err, verify.ErrInvalid) {
			t.Errorf("%s: Check = %+v, %v; want ErrInvalid", name, c, err)
		}
	}
	nl := bytes.IndexByte(table, '\n')
	short := table[nl+1:]
	refused("line removed", m.SnapshotID, mb, short)
	refused("line duplicated", m.SnapshotID, mb, append(bytes.Clone(table[:nl+1]), table...))
	refused("empty table", m.SnapshotID, mb, nil)
	for i := range table {
		bad := bytes.Clone(table)
		bad[i] ^= 0x01
		if _, err := verify.Check(m.SnapshotID, mb, bad); !errors.Is(err, verify.ErrInvalid) {
			t.Fatalf("table byte %d flipped: %v", i, err)
		}
	}
	// A manifest that names the shortened table by its digest, but keeps
	// the old count or byte total.
	for name, f := range map[string]func(m *verify.Manifest){
		"count of the full table": func(m *verify.Manifest) {
			m.Members = verify.MembersRef{URI: verify.MembersURI(verify.SHA256(short)), Count: 3, Bytes: 10}
		},
		"bytes of the full table": func(m *verify.Manifest) {
			m.Members = verify.MembersRef{URI: verify.MembersURI(verify.SHA256(short)), Count: 2, Bytes: 15}
		},
	} {
		wrong, wb, _ := buildSnapshot(t, ms, f)
		refused(name, wrong.SnapshotID, wb, short)
	}
	// The same with the right count and total is accepted.
	right, rb, _ := buildSnapshot(t, ms, func(m *verify.Manifest) {
		m.Members = verify.MembersRef{URI: verify.MembersURI(verify.SHA256(short)), Count: 2, Bytes: 10}
	})
	if _, err := verify.Check(right.SnapshotID, rb, short); err != nil {
		t.Errorf("shortened table with the right count: %v", err)
	}
	// A table whose digest matches but that is not a well-formed table.
	junk := []byte("not json\n")
	bad, bb, _ := buildSnapshot(t, ms, func(m *verify.Manifest) {
		m.Members = verify.MembersRef{URI: verify.MembersURI(verify.SHA256(junk)), Count: 1}
	})
	refused("malformed table", bad.SnapshotID, bb, junk)
}

// store is a Getter over a map, like a local store directory.
type store map[string][]byte

func (s store) Get(_ context.Context, key string) ([]byte, error) {
	b, ok := s[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, fs.ErrNotExist)
	}
	return b, nil
}

func TestLoad(t *testing.T) {
	ctx := context.Background()
	ms := []verify.Member{casMember("a"), s3Member("b")}
	m, mb, table := buildSnapshot(t, ms, nil)
	td, _ := m.Members.Digest()
	good := store{verify.ManifestKey(m.SnapshotID): mb, verify.MembersKey(td): table}
	s, err := verify.Load(ctx, good, m.SnapshotID)
	if err != nil {
		t.Fatal(err)
	}
	if s.Digest() != m.SnapshotID || !reflect.DeepEqual(s.Members(), ms) {
		t.Fatalf("Load = %+v", s)
	}

	if _, err := verify.Load(ctx, store{}, m.SnapshotID); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no manifest: %v", err)
	}
	if _, err := verify.Load(ctx, store{verify.ManifestKey(m.SnapshotID): mb}, m.SnapshotID); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no table: %v", err)
	}
	tampered := store{verify.ManifestKey(m.SnapshotID): mb, verify.MembersKey(td): append(bytes.Clone(table), table...)}
	if _, err := verify.Load(ctx, tampered, m.SnapshotID); !errors.Is(err, verify.ErrInvalid) {
		t.Errorf("tampered table: %v", err)
	}
	// A manifest stored under another manifest's key.
	other, ob, _ := buildSnapshot(t, ms, func(m *verify.Manifest) { m.Purpose = "other" })
	swapped := store{verify.ManifestKey(other.SnapshotID): mb, verify.MembersKey(td): table}
	if _, err := verify.Load(ctx, swapped, other.SnapshotID); !errors.Is(err, verify.ErrInvalid) {
		t.Errorf("swapped manifest: %v", err)
	}
	_ = ob
	// A table with a member problem loads, but yields no Snapshot.
	bad := []verify.Member{casMember("a"), casMember("a/b")}
	bm, bmb, btable := buildSnapshot(t, bad, nil)
	btd, _ := bm.Members.Digest()
	if _, err := verify.Load(ctx, store{verify.ManifestKey(bm.SnapshotID): bmb, verify.MembersKey(btd): btable}, bm.SnapshotID); !errors.Is(err, verify.ErrInvalid) {
		t.Errorf("member problem: %v", err)
	}
}

func TestParseDigest(t *testing.T) {
	h := strings.Repeat("0123456789abcdef", 4)
	if d, err := verify.ParseDigest("sha256:" + h); err != nil || d.Hex() != h || d.String() != "sha256:"+h {
		t.Fatalf("ParseDigest(valid) = %q, %v", d, err)
	}
	for _, s := range []string{
		"", "latest", "main", "prod", "v1.2.3", "my-dataset@2026-01", "my-alias",
		h, "sha256:", "sha256", "sha256:" + h[:63], "sha256:" + h + "0", "sha256:abcd",
		"sha256:" + strings.ToUpper(h), "sha256:" + h[:63] + "A", "SHA256:" + h, "Sha256:" + h,
		"sha512:" + h, "blake3:" + h, "sha256:" + h[:63] + "g", "sha256:" + h + "\n", " sha256:" + h,
		"sha256: " + h[1:], "sha256:" + h[:62] + "é",
		"manifests/sha256/" + h, "/tmp/manifest.json", "./manifest.json", "s3://bucket/manifests/sha256/" + h,
		"cas://sha256/" + h,
	} {
		if d, err := verify.ParseDigest(s); !errors.Is(err, verify.ErrNotDigest) {
			t.Errorf("ParseDigest(%q) = %q, %v; want ErrNotDigest", s, d, err)
		}
	}
}

// TestKeys pins the store layout of docs/manifest.md.
func TestKeys(t *testing.T) {
	h := strings.Repeat("ab", 32)
	d := verify.Digest("sha256:" + h)
	for got, want := range map[string]string{
		verify.ManifestKey(d):      "manifests/sha256/" + h,
		verify.MembersKey(d):       "members/sha256/" + h,
		verify.MembersURI(d):       "cas://sha256/" + h,
		verify.OutboardKey(h):      "bao/blake3/" + h,
		verify.CASKey(h):           "cas/blake3/" + h,
		string(verify.SHA256(nil)): "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	if got, err := (verify.MembersRef{URI: verify.MembersURI(d)}).Digest(); err != nil || got != d {
		t.Errorf("MembersRef.Digest = %s, %v", got, err)
	}
}

// FuzzParseManifest seals arbitrary JSON objects with the digest rule, so
// that the fuzzer reaches the checks after the digest, and checks what an
// accepted manifest guarantees. Raw input is also parsed as it is.
func FuzzParseManifest(f *testing.F) {
	_, b, _ := buildSnapshot(f, []verify.Member{casMember("a")}, func(m *verify.Manifest) {
		m.Extra = map[string]json.RawMessage{"x": json.RawMessage(`[1,{"y":null}]`)}
	})
	f.Add(b)
	min, _ := seal(f, minimalDoc())
	f.Add(min)
	shadow := minimalDoc()
	shadow["ſplitPolicy"] = "dir:x"
	shadowed, _ := seal(f, shadow)
	f.Add(shadowed)
	f.Fuzz(func(t *testing.T, in []byte) {
		verify.ParseManifest(verify.SHA256(in), in) // must not panic
		var doc map[string]any
		if _, err := jcs.Canonicalize(in); err != nil || json.Unmarshal(in, &doc) != nil || doc == nil {
			return
		}
		b, d := seal(t, doc)
		m, err := verify.ParseManifest(d, b)
		if err != nil {
			if !errors.Is(err, verify.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if m.Schema != verify.Schema || m.SnapshotID != d || m.Members.Count < 0 || m.Members.Bytes < 0 {
			t.Fatalf("accepted %s as %+v", b, m)
		}
		if _, err := m.Members.Digest(); err != nil {
			t.Fatalf("accepted %s with members.uri %q", b, m.Members.URI)
		}
		for _, p := range m.Parents {
			if _, err := verify.ParseDigest(string(p)); err != nil {
				t.Fatalf("accepted %s with parent %q", b, p)
			}
		}
		var raw map[string]json.RawMessage
		json.Unmarshal(b, &raw)
		for k, v := range m.Extra {
			for _, known := range []string{"schema", "snapshotId", "parents", "sources", "tombstoneWatermark",
				"benchmarkFence", "recordSchema", "selectionPolicy", "transform", "splitPolicy", "purpose", "members", "envelope"} {
				if strings.EqualFold(k, known) {
					t.Fatalf("accepted %s with extra field %q that encoding/json reads as %q", b, k, known)
				}
			}
			if !bytes.Equal(v, raw[k]) {
				t.Fatalf("extra field %q kept as %s, stored %s", k, v, raw[k])
			}
		}
	})
}
