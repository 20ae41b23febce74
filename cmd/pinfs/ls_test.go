package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"unicode"

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
