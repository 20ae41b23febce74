package verify_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
)

// The files in testdata/golden pin the bytes and the digest of a small
// manifest and its member table. A change to any of them is a change of
// the manifest format: it needs a new schema version (Schema), not just a
// regenerated golden file. Regenerate only for a deliberate format change:
//
//	go test ./verify -run Golden -update
var update = flag.Bool("update", false, "rewrite testdata/golden (a format change: bump the schema)")

const goldenDir = "testdata/golden"

// goldenSnapshot is the fixed content of the golden files. Digests are
// literals (b3sum and sha256sum output), not computed by the code under test.
func goldenSnapshot() ([]verify.Member, *verify.Manifest) {
	ms := []verify.Member{
		{
			ID: "readme", Path: "README.md", Size: 0,
			Digest: "blake3:af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
			CAS:    "blake3:af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
		},
		{
			ID: "train/0001", Path: "train/0001.txt", Split: "train", Size: 5,
			Digest: "blake3:ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f",
			S3: &verify.S3Source{
				Bucket: "datasets", Key: "corpus/train/0001.txt",
				VersionID: "3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY", ETag: `"5d41402abc4b2a76b9719d911017c592"`,
			},
		},
		{
			ID: "val/0001", Path: "val/0001.txt", Split: "val", Size: 5,
			Digest: "blake3:d7894ae9716d38d2dfad0ec55424ca321ee12453d51f1b3adeb77d0475ed988c",
			CAS:    "blake3:d7894ae9716d38d2dfad0ec55424ca321ee12453d51f1b3adeb77d0475ed988c",
		},
	}
	fence := int64(1700000000)
	m := &verify.Manifest{
		Parents: []verify.Digest{"sha256:e47125968b3b71049fbc4802d1e40a71ea1359decfabacf70b34588037d4ff0c"},
		Sources: []verify.Source{
			{ID: "s3", URI: "s3://datasets/corpus/", Listing: "sha256:0fc4dfc4feb3b154d20f22308900bf028642220b043804b050d3caaa49dede60"},
			{ID: "local", URI: "file:///srv/extra"},
		},
		BenchmarkFence: &fence,
		SplitPolicy:    "dir:test,train,val,validation",
		Purpose:        "golden test of manifest format v1 — ünïcödé kept as UTF-8",
	}
	return ms, m
}

func TestGolden(t *testing.T) {
	ms, m := goldenSnapshot()
	table, err := verify.EncodeMembers(ms)
	if err != nil {
		t.Fatal(err)
	}
	m.Members = verify.MembersRef{URI: verify.MembersURI(verify.SHA256(table)), Count: 3, Bytes: 10}
	manifest, err := verify.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"members.jsonl": table,
		"manifest.json": manifest,
		"digest.txt":    []byte(m.SnapshotID.String() + "\n"),
	}
	if *update {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(goldenDir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Log("rewrote", goldenDir, "- this is a format change: bump the schema version")
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(goldenDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s changed: the manifest format is not what v1 pinned.\nfile: %s\nnow:  %s", name, got, want)
		}
	}
}

// TestGoldenDigestIndependently applies the digest rule to the golden files
// without the code under test: strip the snapshotId member from the text,
// sha256 the rest (what `sha256sum` would print), and compare.
func TestGoldenDigestIndependently(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(goldenDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	manifest, table := read("manifest.json"), read("members.jsonl")
	digest := strings.TrimSuffix(string(read("digest.txt")), "\n")

	// snapshotId is neither the first nor the last key ("schema" sorts
	// before it, "sources" after), so exactly one ',"snapshotId":"..."'
	// is removed.
	re := regexp.MustCompile(`,"snapshotId":"(sha256:[0-9a-f]{64})"`)
	found := re.FindAllSubmatch(manifest, -1)
	if len(found) != 1 {
		t.Fatalf("want one snapshotId in manifest.json, found %d", len(found))
	}
	if string(found[0][1]) != digest {
		t.Errorf("manifest.json names itself %s, digest.txt says %s", found[0][1], digest)
	}
	payload := re.ReplaceAll(manifest, nil)
	sum := sha256.Sum256(payload)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != digest {
		t.Errorf("sha256 of manifest.json without snapshotId = %s, digest.txt = %s", got, digest)
	}

	// The manifest names the table by the sha256 of its bytes, and its
	// count is the number of lines.
	tsum := sha256.Sum256(table)
	if uri := `"uri":"cas://sha256/` + hex.EncodeToString(tsum[:]) + `"`; !bytes.Contains(manifest, []byte(uri)) {
		t.Errorf("manifest.json does not contain %s", uri)
	}
	if n := bytes.Count(table, []byte("\n")); !bytes.Contains(manifest, []byte(`"count":3`)) || n != 3 {
		t.Errorf("table has %d lines; manifest: %s", n, manifest)
	}
	// No white space outside strings, no trailing newline.
	if bytes.ContainsAny(manifest, "\n\t\r") || bytes.Contains(manifest, []byte(`": `)) || bytes.Contains(manifest, []byte(`, "`)) {
		t.Errorf("manifest.json has white space: %s", manifest)
	}

	// And the code under test accepts exactly these files.
	d, err := verify.ParseDigest(digest)
	if err != nil {
		t.Fatal(err)
	}
	c, err := verify.Check(d, manifest, table)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Problems) != 0 || c.Table.Len() != 3 {
		t.Fatalf("Check: %d members, problems %v", c.Table.Len(), c.Problems)
	}
}
