package integration

import (
	"bytes"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/fusetest"

	"github.com/pinfs/pinfs/verify/b3"
)

// flip changes one byte of the file at p in place.
func flip(t testing.TB, p string, at int64) {
	t.Helper()
	fh, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	b := make([]byte, 1)
	if _, err := fh.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := fh.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

func wantEIO(t testing.TB, p string) {
	t.Helper()
	_, err := readFile(t, p)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("read %s: %v, want EIO", p, err)
	}
}

func TestCorruptionAtRestFailsTheReadAndIsRecorded(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	flip(t, f.s.VersionPath(t, "data", "ds/train/big.bin", f.vers["train/big.bin"]), 2<<20+5)
	record := filepath.Join(f.work, "run.jsonl")
	dir, _ := f.mount(t, filepath.Join(f.work, "cache"), record)
	wantEIO(t, filepath.Join(dir, "train/big.bin"))
	// The blocks before the bad one still read; other members are fine.
	fh, err := os.Open(filepath.Join(dir, "train/big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 1<<20)
	if _, err := fh.ReadAt(head, 0); err != nil || !bytes.Equal(head, f.data["train/big.bin"][:1<<20]) {
		t.Errorf("first block of the corrupted member: %v", err)
	}
	fh.Close()
	if b, err := readFile(t, filepath.Join(dir, "train/mid.bin")); err != nil || !bytes.Equal(b, f.data["train/mid.bin"]) {
		t.Errorf("other member: %v", err)
	}
	ms := events(t, record, "mismatch")
	if len(ms) == 0 || ms[0]["path"] != "train/big.bin" || ms[0]["from"] != "network" {
		t.Fatalf("mismatch events: %v", ms)
	}
	if ms[0]["version_id"] != f.vers["train/big.bin"] || ms[0]["expected"] != b3.Of(f.data["train/big.bin"]).String() {
		t.Errorf("mismatch event lacks version or expected digest: %v", ms[0])
	}
}

// blockFiles returns the disk-cache member files under cache.
func blockFiles(t testing.TB, cache string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(filepath.Join(cache, "blocks"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.HasPrefix(d.Name(), ".") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestCorruptDiskCacheIsHealed(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	cache, record := filepath.Join(f.work, "cache"), filepath.Join(f.work, "run.jsonl")
	dir, d := f.mount(t, cache, record)
	if b, err := readFile(t, filepath.Join(dir, "train/big.bin")); err != nil || !bytes.Equal(b, f.data["train/big.bin"]) {
		t.Fatalf("first read: %v", err)
	}
	d.stop(t, 10*time.Second)
	blocks := blockFiles(t, cache)
	if len(blocks) == 0 {
		t.Fatal("nothing in the disk cache after a full read")
	}
	for _, p := range blocks {
		os.Chmod(p, 0o600) // a whole-member file is 0400
		flip(t, p, 100)
	}
	dir, _ = f.mount(t, cache, record)
	for rel, want := range f.data {
		if b, err := readFile(t, filepath.Join(dir, rel)); err != nil || !bytes.Equal(b, want) {
			t.Errorf("%s after disk-cache corruption: %v", rel, err)
		}
	}
	var fromDisk int
	for _, e := range events(t, record, "mismatch") {
		if e["from"] == "disk" {
			fromDisk++
		}
	}
	if fromDisk == 0 {
		t.Error("no mismatch event from the disk cache")
	}
}

func TestDeletedVersionGivesEIO(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	f.s.DeleteVersion(t, "data", "ds/val/v.txt", f.vers["val/v.txt"])
	record := filepath.Join(f.work, "run.jsonl")
	dir, _ := f.mount(t, filepath.Join(f.work, "cache"), record)
	wantEIO(t, filepath.Join(dir, "val/v.txt"))
	if b, err := readFile(t, filepath.Join(dir, "README")); err != nil || !bytes.Equal(b, f.data["README"]) {
		t.Errorf("other member: %v", err)
	}
	if vm := events(t, record, "version_missing"); len(vm) == 0 || vm[0]["path"] != "val/v.txt" {
		t.Fatalf("version_missing events: %v", vm)
	}
}

func TestRemountServesFromCacheWithStoreDown(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	cache := filepath.Join(f.work, "cache")
	dir, d := f.mount(t, cache, filepath.Join(f.work, "run.jsonl"))
	for _, rel := range []string{"train/big.bin", "val/v.txt"} {
		if _, err := readFile(t, filepath.Join(dir, rel)); err != nil {
			t.Fatal(err)
		}
	}
	d.stop(t, 10*time.Second)
	f.s.Stop()
	dir, _ = f.mount(t, cache, filepath.Join(f.work, "run2.jsonl"), "--cache-mem", "0")
	for _, rel := range []string{"train/big.bin", "val/v.txt"} {
		if b, err := readFile(t, filepath.Join(dir, rel)); err != nil || !bytes.Equal(b, f.data[rel]) {
			t.Errorf("%s with the store down: %v", rel, err)
		}
	}
}

func TestSIGTERMWithAnOpenFileEndsTheRun(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	record := filepath.Join(f.work, "run.jsonl")
	dir, d := f.mount(t, filepath.Join(f.work, "cache"), record)
	fh, err := os.Open(filepath.Join(dir, "README"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	d.cmd.Process.Signal(syscall.SIGTERM)
	if code := d.exitCode(t, 20*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if fusetest.Mounted(dir) {
		t.Error("still mounted after SIGTERM")
	}
	all := events(t, record, "")
	if len(all) == 0 || all[len(all)-1]["event"] != "run_end" {
		t.Fatalf("run record does not end with run_end: %v", all)
	}
}

func TestMountAgainAfterSIGKILL(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	cache, record := filepath.Join(f.work, "cache"), filepath.Join(f.work, "run.jsonl")
	dir, d := f.mount(t, cache, record)
	d.cmd.Process.Kill()
	d.exitCode(t, 10*time.Second)
	args := []string{f.digest, dir, "--store", f.store, "--cache-dir", cache, "--run-record", record}
	startMount(t, f.env, dir, args...)
	if b, err := readFile(t, filepath.Join(dir, "README")); err != nil || !bytes.Equal(b, f.data["README"]) {
		t.Fatalf("read after remount over a dead mount: %v", err)
	}
}

func TestRunIDBindsTheDigest(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	cache, record := filepath.Join(f.work, "cache"), filepath.Join(f.work, "run.jsonl")
	_, d := f.mount(t, cache, record, "--run-id", "job-7")
	d.stop(t, 10*time.Second)
	_, d = f.mount(t, cache, record, "--run-id", "job-7")
	d.stop(t, 10*time.Second)
	if n := len(events(t, record, "resume")); n != 1 {
		t.Fatalf("%d resume events, want 1", n)
	}
	other := mustPinfs(t, f.env, "pin", "s3://data/ds/", "--store", f.store).lastLine()
	if other == f.digest {
		t.Fatal("test setup: the re-pin after an overwrite has the same digest")
	}
	dir := t.TempDir()
	r := wantExit(t, f.env, 1, []string{"job-7", f.digest}, "mount", other, dir, "--store", f.store,
		"--cache-dir", cache, "--run-record", record, "--run-id", "job-7", "--foreground")
	if fusetest.Mounted(dir) {
		t.Errorf("mounted although the run id is bound to another digest: %v", r)
	}
}

func TestNoMemberRequestWithoutVersion(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	target, _ := url.Parse(f.s.Endpoint)
	var mu sync.Mutex
	var reqs []string
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	env := append(append([]string{}, f.env...), "AWS_ENDPOINT_URL_S3="+srv.URL, "AWS_ENDPOINT_URL="+srv.URL)
	dir := filepath.Join(t.TempDir(), "m")
	os.MkdirAll(dir, 0o755)
	startMount(t, env, dir, f.digest, dir, "--store", f.store, "--cache-dir", filepath.Join(f.work, "cache"), "--run-record", filepath.Join(f.work, "run.jsonl"))
	for rel, want := range f.data {
		if b, err := readFile(t, filepath.Join(dir, rel)); err != nil || !bytes.Equal(b, want) {
			t.Errorf("%s through the proxy: %v", rel, err)
		}
	}
	wantExit(t, env, 0, []string{"verify: OK"}, "verify", f.digest, "--store", f.store, "--deep")
	mu.Lock()
	defer mu.Unlock()
	members := 0
	for _, r := range reqs {
		method, uri, _ := strings.Cut(r, " ")
		if (method == "GET" || method == "HEAD") && strings.HasPrefix(uri, "/data/") {
			members++
			if !strings.Contains(uri, "versionId=") {
				t.Errorf("member request without a version: %s", r)
			}
		}
	}
	if members == 0 {
		t.Fatalf("the proxy saw no member requests: %v", reqs)
	}
}
