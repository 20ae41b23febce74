package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/pinfs/pinfs/integration/s3test"
)

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// dataset puts a small versioned dataset under data/ds/ and returns the
// version id of every key (relative to the prefix).
func dataset(t testing.TB, s *s3test.Server) map[string]string {
	t.Helper()
	s.CreateBucket(t, "data", true)
	s.CreateBucket(t, "store", true)
	vs := map[string]string{}
	for k, v := range map[string][]byte{
		"train/a.bin": randomBytes(t, 300_000), // several Bao groups
		"train/b.txt": []byte("bravo\n"),
		"val/c.txt":   []byte("charlie\n"),
		"README":      []byte("readme\n"),
	} {
		vs[k] = s.Put(t, "data", "ds/"+k, v)
	}
	s.Put(t, "data", "outside/x", []byte("not under the prefix"))
	return vs
}

func TestPinVerifyLsDiffLog(t *testing.T) {
	t.Parallel()
	s := s3test.Start(t)
	env := s.Env()
	vs := dataset(t, s)
	st := "s3://store/pinfs"

	d1 := mustPinfs(t, env, "pin", "s3://data/ds/", "--store", st, "--purpose", "it").lastLine()
	if !strings.HasPrefix(d1, "sha256:") || len(d1) != 71 {
		t.Fatalf("pin printed %q, want a digest", d1)
	}
	if d := mustPinfs(t, env, "pin", "s3://data/ds", "--store", st, "--purpose", "it").lastLine(); d != d1 {
		t.Fatalf("second pin of unchanged data: %s, first %s", d, d1)
	}
	ls := mustPinfs(t, env, "ls", d1, "--store", st, "--long").stdout // full version ids
	for k, v := range vs {
		if !strings.Contains(ls, v) || !strings.Contains(ls, k) {
			t.Errorf("ls lacks %s at version %s:\n%s", k, v, ls)
		}
	}
	if strings.Contains(ls, "outside") {
		t.Errorf("ls shows a key outside the prefix:\n%s", ls)
	}
	wantExit(t, env, 0, []string{"verify: OK", "members 4"}, "verify", d1, "--store", st)
	wantExit(t, env, 0, []string{"verify: OK", "deep"}, "verify", d1, "--store", st, "--deep")

	// Overwrite a pinned key: the snapshot still reads its pinned version.
	newA := s.Put(t, "data", "ds/train/a.bin", []byte("new content"))
	wantExit(t, env, 0, []string{"verify: OK"}, "verify", d1, "--store", st, "--deep")
	ls = mustPinfs(t, env, "ls", d1, "train/a.bin", "--store", st, "--long").stdout
	if !strings.Contains(ls, vs["train/a.bin"]) || strings.Contains(ls, newA) {
		t.Fatalf("ls after overwrite does not show the pinned version %s:\n%s", vs["train/a.bin"], ls)
	}

	// A new pin with the first as parent: diff lists exactly the change.
	s.Put(t, "data", "ds/test/new.txt", []byte("new member"))
	d2 := mustPinfs(t, env, "pin", "s3://data/ds/", "--store", st, "--parent", d1).lastLine()
	diff := mustPinfs(t, env, "diff", d1, d2, "--store", st).stdout
	for _, w := range []string{"~ train/a.bin", "+ test/new.txt", "added 1, removed 0, changed 1, moved 0"} {
		if !strings.Contains(diff, w) {
			t.Errorf("diff lacks %q:\n%s", w, diff)
		}
	}
	if strings.Contains(diff, "b.txt") || strings.Contains(diff, "c.txt") {
		t.Errorf("diff lists unchanged members:\n%s", diff)
	}
	log := mustPinfs(t, env, "log", d2, "--store", st).stdout
	if lines := strings.Split(strings.TrimSpace(log), "\n"); len(lines) != 2 ||
		!strings.HasPrefix(lines[0], d2) || !strings.Contains(lines[1], d1) {
		t.Errorf("log of %s:\n%s", d2, log)
	}

	// A deleted pinned version fails verify and is named.
	s.DeleteVersion(t, "data", "ds/val/c.txt", vs["val/c.txt"])
	r := wantExit(t, env, 1, []string{"version_missing: val/c.txt", "verify: FAILED"}, "verify", d1, "--store", st)
	if strings.Contains(r.stdout, "FAIL version_missing: train") {
		t.Errorf("verify blames members that are fine:\n%s", r.stdout)
	}
	wantExit(t, env, 1, []string{`"version_missing": 1`}, "verify", d1, "--store", st, "--json")
}

func TestPinRefusesUnversionedAndNullVersions(t *testing.T) {
	t.Parallel()
	s := s3test.Start(t)
	env := s.Env()
	s.CreateBucket(t, "store", true)
	s.CreateBucket(t, "plain", false)
	s.Put(t, "plain", "ds/a", []byte("a"))
	wantExit(t, env, 1, []string{"bucket plain does not have versioning enabled"}, "pin", "s3://plain/ds/", "--store", "s3://store/p")

	// Objects written before versioning was enabled keep the "null" version.
	s.CreateBucket(t, "late", false)
	s.Put(t, "late", "ds/old", []byte("old"))
	_, err := s.Client(t).PutBucketVersioning(context.Background(), &s3.PutBucketVersioningInput{
		Bucket:                  aws.String("late"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Put(t, "late", "ds/new", []byte("new"))
	r := wantExit(t, env, 1, []string{"ds/old"}, "pin", "s3://late/ds/", "--store", "s3://store/p")
	if strings.Contains(r.stderr, "ds/new") {
		t.Errorf("refusal names a properly versioned key: %s", r.stderr)
	}
}

// tamper applies f to the store file under dir/key.
func tamper(t testing.TB, dir, key string, f func([]byte) []byte) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(key))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTamperedStoreIsRefused(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	for name, content := range map[string]string{"train/a": "a", "train/b": "b", "val/c": "c"} {
		os.MkdirAll(filepath.Join(src, filepath.Dir(name)), 0o755)
		os.WriteFile(filepath.Join(src, name), []byte(content), 0o644)
	}
	for _, tc := range []struct {
		name string
		key  func(manifest, table string) string
		f    func([]byte) []byte
		want string
	}{
		{"manifest byte", func(m, _ string) string { return m },
			func(b []byte) []byte { return bytes.Replace(b, []byte(`"purpose":"p"`), []byte(`"purpose":"q"`), 1) }, "invalid snapshot"},
		{"table byte", func(_, tb string) string { return tb },
			func(b []byte) []byte { return bytes.Replace(b, []byte(`"size":1`), []byte(`"size":2`), 1) }, "invalid snapshot"},
		{"table line removed", func(_, tb string) string { return tb },
			func(b []byte) []byte { i := bytes.IndexByte(b, '\n'); return b[i+1:] }, "invalid snapshot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := t.TempDir()
			d := mustPinfs(t, nil, "pin", src, "--store", st, "--purpose", "p").lastLine()
			manifest := "manifests/sha256/" + strings.TrimPrefix(d, "sha256:")
			mb, err := os.ReadFile(filepath.Join(st, manifest))
			if err != nil {
				t.Fatal(err)
			}
			i := bytes.Index(mb, []byte("cas://sha256/"))
			table := "members/sha256/" + string(mb[i+13:i+13+64])
			tamper(t, st, tc.key(manifest, table), tc.f)
			wantExit(t, nil, 1, []string{tc.want}, "verify", d, "--store", st)
			wantExit(t, nil, 1, []string{tc.want}, "ls", d, "--store", st)
		})
	}
}

func TestDirPinIntoS3Store(t *testing.T) {
	t.Parallel()
	s := s3test.Start(t)
	env := s.Env()
	s.CreateBucket(t, "store", true)
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "big"), randomBytes(t, 200_000), 0o644)
	os.WriteFile(filepath.Join(src, "small"), []byte("s"), 0o644)
	d := mustPinfs(t, env, "pin", src, "--store", "s3://store/p").lastLine()
	ls := mustPinfs(t, env, "ls", d, "--store", "s3://store/p", "--long").stdout // --long: the full source
	if strings.Count(ls, "s3://store/p/cas/blake3/") != 2 {
		t.Errorf("directory members in an S3 store are not pinned S3 versions:\n%s", ls)
	}
	wantExit(t, env, 0, []string{"verify: OK"}, "verify", d, "--store", "s3://store/p", "--deep")
}

func TestMountAcceptsDigestsOnly(t *testing.T) {
	t.Parallel()
	mnt := t.TempDir()
	for _, target := range []string{"latest", "customer-support-latest", "sha256:abc", "sha256:" + strings.Repeat("A", 64), "/data/x", "sha512:" + strings.Repeat("a", 64)} {
		wantExit(t, nil, 2, []string{"digests only"}, "mount", target, mnt, "--store", t.TempDir())
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	wantExit(t, nil, 2, []string{"unknown command"}, "frobnicate")
	wantExit(t, nil, 2, []string{"--store is required"}, "verify", "sha256:"+strings.Repeat("a", 64))
	wantExit(t, nil, 2, []string{"unknown flag"}, "ls", "--bogus")
	for _, c := range []string{"pin", "verify", "ls", "diff", "log", "mount"} {
		wantExit(t, nil, 0, []string{"Usage: pinfs " + c, "Exit status"}, c, "--help")
	}
}

// TestPinListsAcrossPages pins more keys than one ListObjectVersions page
// holds (1000): every key exactly once.
func TestPinListsAcrossPages(t *testing.T) {
	t.Parallel()
	s := s3test.Start(t)
	env := s.Env()
	s.CreateBucket(t, "data", true)
	s.CreateBucket(t, "store", true)
	c := s.Client(t)
	const n = 1234
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := c.PutObject(context.Background(), &s3.PutObjectInput{
				Bucket: aws.String("data"), Key: aws.String(fmt.Sprintf("ds/d%02d/f%04d", i%13, i)), Body: strings.NewReader("x"),
			})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	d := mustPinfs(t, env, "pin", "s3://data/ds/", "--store", "s3://store/p").lastLine()
	ls := mustPinfs(t, env, "ls", d, "--store", "s3://store/p", "--long").stdout // --long: the full source
	if got := strings.Count(ls, "\n") - 1; got != n {
		t.Fatalf("pinned %d members, want %d", got, n)
	}
}
