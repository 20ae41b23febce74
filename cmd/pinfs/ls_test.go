package main

import (
	"bytes"
	"context"
	"iter"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/pinfs/pinfs/store/dial"
	"github.com/pinfs/pinfs/verify"
)

// TestLsPrintsNoControlCharacters: a verified table can still hold control
// characters outside paths (a split, an S3 key, a version id); the listing
// quotes such a field rather than printing an ESC, CSI or newline raw.
func TestLsPrintsNoControlCharacters(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const digest = "blake3:ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f"
	ms := []verify.Member{
		{ID: "a", Path: "a", Split: "tr\x1b[2Jain", Size: 5, Digest: digest,
			S3: &verify.S3Source{Bucket: "b", Key: "k\n/etc/shadow", VersionID: "v\u009b1", ETag: `"e"`}},
		{ID: "b", Path: "b", Split: "val", Size: 5, Digest: digest,
			S3: &verify.S3Source{Bucket: "b", Key: "data/b", VersionID: "v2"}},
	}
	d := putSnapshot(t, dir, ms)

	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"ls", d.String(), "--store", dir}, &out, &errOut); code != exitOK {
		t.Fatalf("pinfs ls: exit %d: %s", code, errOut.String())
	}
	got := out.String()
	if i := strings.IndexFunc(strings.ReplaceAll(got, "\n", ""), unicode.IsControl); i >= 0 {
		t.Fatalf("pinfs ls printed a control character:\n%q", got)
	}
	if lines := strings.Count(got, "\n"); lines != 3 {
		t.Errorf("pinfs ls printed %d lines, want a header and 2 members:\n%s", lines, got)
	}
	for _, want := range []string{`"tr\x1b[2Jain"`, `"s3://b/k\n/etc/shadow"`, `"v\u009b1"`, "s3://b/data/b", " v2 "} {
		if !strings.Contains(got, want) {
			t.Errorf("pinfs ls lacks %s:\n%s", want, got)
		}
	}
}

// TestLsRefusesControlInPath: a table with a control character in a path
// fails the member checks, so pinfs ls prints no member of it, and its
// error names the path quoted.
func TestLsRefusesControlInPath(t *testing.T) {
	dir := t.TempDir()
	const digest = "blake3:ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f"
	d := putSnapshot(t, dir, []verify.Member{{ID: "x", Path: "x\n/etc/shadow", Size: 5, Digest: digest, CAS: digest}})
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"ls", d.String(), "--store", dir}, &out, &errOut); code != exitFailed {
		t.Fatalf("pinfs ls: exit %d, want %d:\n%s", code, exitFailed, out.String())
	}
	if out.Len() != 0 || !strings.Contains(errOut.String(), verify.KindUnsafePath) {
		t.Fatalf("pinfs ls printed %q, error %q; want nothing and an %s error", out.String(), errOut.String(), verify.KindUnsafePath)
	}
	if strings.ContainsFunc(strings.TrimSuffix(errOut.String(), "\n"), unicode.IsControl) {
		t.Fatalf("pinfs ls printed the refused path raw: %q", errOut.String())
	}
}

// putSnapshot stores the member table of ms and its manifest in the local
// store at dir and returns the manifest digest.
func putSnapshot(t *testing.T, dir string, ms []verify.Member) verify.Digest {
	t.Helper()
	ctx := context.Background()
	st, err := dial.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	table, err := verify.EncodeMembers(ms)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, m := range ms {
		total += m.Size
	}
	td := verify.SHA256(table)
	man := &verify.Manifest{Members: verify.MembersRef{URI: verify.MembersURI(td), Count: int64(len(ms)), Bytes: total}}
	mb, err := verify.Build(man)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, verify.MembersKey(td), table); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, verify.ManifestKey(man.SnapshotID), mb); err != nil {
		t.Fatal(err)
	}
	return man.SnapshotID
}

// TestLsFitsIn120Columns: pinfs ls of an S3 pin fits 120 columns (short
// digests and version ids, no SOURCE that repeats PATH); --long prints
// every field in full, as ls did before.
func TestLsFitsIn120Columns(t *testing.T) {
	dir := t.TempDir()
	const digest = "blake3:ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f"
	const version = "3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY" // as long as AWS makes them
	var ms []verify.Member
	for i, p := range []string{"test/shard-000/part-00000.jsonl", "train/part-00000.jsonl", "train/part-00001.jsonl", "validation/part-00000.jsonl"} {
		split, _, _ := strings.Cut(p, "/")
		ms = append(ms, verify.Member{ID: p, Path: p, Split: split, Size: 123456789012, Digest: digest,
			S3: &verify.S3Source{Bucket: "ml-datasets-prod", Key: "exports/support-tickets/v3/" + p, VersionID: version + string(rune('a'+i)), ETag: `"e"`}})
	}
	d := putSnapshot(t, dir, ms)
	ls := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(t.Context(), append([]string{"ls", d.String(), "--store", dir}, args...), &out, &errOut); code != exitOK {
			t.Fatalf("pinfs ls %v: exit %d: %s", args, code, errOut.String())
		}
		return out.String()
	}
	short := ls()
	lines := strings.Split(strings.TrimSuffix(short, "\n"), "\n")
	if len(lines) != 1+len(ms) {
		t.Fatalf("pinfs ls printed %d lines, want a header and %d members:\n%s", len(lines), len(ms), short)
	}
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > 120 {
			t.Errorf("pinfs ls: a line of %d columns, want at most 120:\n%s", n, l)
		}
	}
	if strings.Join(strings.Fields(lines[0]), " ") != "SIZE SPLIT DIGEST VERSION PATH" {
		t.Errorf("pinfs ls header %q: want no SOURCE, which would repeat PATH", lines[0])
	}
	for i, l := range lines[1:] {
		if !strings.HasSuffix(l, "  "+ms[i].Path) || !strings.Contains(l, "blake3:ea8f163db386  ") || !strings.Contains(l, " 3HL4kqtJlcpXro… ") {
			t.Errorf("pinfs ls line %q: want the short digest and version and the path", l)
		}
	}

	long := ls("--long")
	lines = strings.Split(strings.TrimSuffix(long, "\n"), "\n")
	if strings.Join(strings.Fields(lines[0]), " ") != "SIZE SPLIT DIGEST SOURCE VERSION PATH" {
		t.Errorf("pinfs ls --long header %q", lines[0])
	}
	for i, l := range lines[1:] {
		m := ms[i]
		if f := strings.Fields(l); len(f) != 6 || f[2] != digest || f[3] != m.Source() || f[4] != m.S3.VersionID || f[5] != m.Path {
			t.Errorf("pinfs ls --long line %q: want every field in full", l)
		}
	}

	// A member elsewhere than prefix+path: SOURCE is back, for all.
	ms[1].S3.Key = "exports/other/x.jsonl"
	d = putSnapshot(t, dir, ms)
	if short = ls(); !strings.Contains(short, "SOURCE") || !strings.Contains(short, "s3://ml-datasets-prod/exports/other/x.jsonl") {
		t.Errorf("pinfs ls of a member whose key is not prefix+path shows no SOURCE:\n%s", short)
	}
}

// TestLsOfADirPinInS3FitsIn120Columns: a member pinned from a directory
// into an S3 store (pinfs pin DIR, pinfs derive's output) is the object
// STORE/cas/blake3/<hex of its digest>: its SOURCE says no more than its
// DIGEST, so pinfs ls shows it as "cas", not as a 100-column key, and its
// lines fit 120 columns; --long still prints the key in full. The same
// key under another bucket or prefix is a source like any other.
func TestLsOfADirPinInS3FitsIn120Columns(t *testing.T) {
	const hex = "ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f"
	const version = "3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY"
	const store = "s3://ml-datasets-prod/pinfs"
	var ms []verify.Member
	for i, p := range []string{"train/part-00000.jsonl", "train/part-00001.jsonl", "validation/part-00000.jsonl"} {
		split, _, _ := strings.Cut(p, "/")
		ms = append(ms, verify.Member{ID: p, Path: p, Split: split, Size: 123456789012, Digest: "blake3:" + hex,
			S3: &verify.S3Source{Bucket: "ml-datasets-prod", Key: "pinfs/" + verify.CASKey(hex), VersionID: version + string(rune('a'+i)), ETag: `"e"`}})
	}
	ls := func(storeURL string) []string {
		t.Helper()
		var out bytes.Buffer
		if err := printMembers(&out, pointers(ms), storeURL); err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	}
	for _, storeURL := range []string{store, store + "/"} {
		lines := ls(storeURL)
		if len(lines) != 1+len(ms) {
			t.Fatalf("pinfs ls printed %d lines, want a header and %d members:\n%s", len(lines), len(ms), strings.Join(lines, "\n"))
		}
		for i, l := range lines {
			if n := utf8.RuneCountInString(l); n > 120 {
				t.Errorf("pinfs ls: a line of %d columns, want at most 120:\n%s", n, l)
			}
			if i == 0 {
				continue
			}
			if f := strings.Fields(l); len(f) != 6 || f[3] != "cas" || f[4] != version[:14]+"…" || f[5] != ms[i-1].Path {
				t.Errorf("pinfs ls of %s: line %q: want SOURCE cas, the short version and the path", storeURL, l)
			}
		}
	}
	for _, other := range []string{"s3://ml-datasets-prod/other", "s3://another-bucket/pinfs"} {
		if lines := ls(other); !strings.Contains(lines[1], " "+ms[0].Source()+" ") {
			t.Errorf("pinfs ls of a store %s: line %q; want the other store's key in full", other, lines[1])
		}
	}
	var long bytes.Buffer
	if err := printMembersLong(&long, pointers(ms)); err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(strings.TrimSuffix(long.String(), "\n"), "\n")[1:] {
		if f := strings.Fields(l); len(f) != 6 || f[3] != ms[i].Source() || f[4] != ms[i].S3.VersionID {
			t.Errorf("pinfs ls --long line %q: want the key and version in full", l)
		}
	}
}

// TestLsSubtreeIsTheFilter: the binary-searched subtree of a PATH is
// exactly the members the linear filter it replaced selected, for names
// that sort between a directory and its children ("a-b", "a.c" sort
// before "a/") and after them ("a0", "ab"), unicode, a trailing slash.
func TestLsSubtreeIsTheFilter(t *testing.T) {
	t.Parallel()
	under := func(p, dir string) bool {
		dir = strings.TrimSuffix(dir, "/")
		return dir == "" || p == dir || strings.HasPrefix(p, dir+"/")
	}
	paths := []string{"a", "a-b", "a.c", "a/b", "a/b/c", "a/bé", "a/é/x", "a0", "ab", "b", "é", "é/a", "é/b/c", "éa"}
	ms := make([]verify.Member, len(paths))
	for i, p := range paths {
		ms[i] = verify.Member{ID: p, Path: p}
	}
	tb := verify.NewTable(ms)
	for _, dir := range []string{"", "a", "a/", "a/b", "a/b/", "a/b/c", "a-b", "é", "é/b", "c", "zz", "a/é", "0"} {
		var got, want []string
		for i := range subtree(tb, dir) {
			got = append(got, tb.Path(i))
		}
		for _, p := range paths {
			if under(p, dir) {
				want = append(want, p)
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("subtree %q = %q, want %q", dir, got, want)
		}
	}
}

// pointers yields a pointer to each of ms, as pinfs ls hands them over.
func pointers(ms []verify.Member) iter.Seq[*verify.Member] {
	return func(yield func(*verify.Member) bool) {
		for i := range ms {
			if !yield(&ms[i]) {
				return
			}
		}
	}
}
