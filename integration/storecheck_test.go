package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/faultproxy"
	"github.com/pinfs/pinfs/integration/fusetest"
)

// storeStatus is what pinfs status MOUNTPOINT --json says of the store
// and the build.
type storeStatus struct {
	Serving    *bool  `json:"serving"`
	Error      string `json:"error"`
	StoreError *struct {
		Kind    string    `json:"kind"`
		Message string    `json:"message"`
		Time    time.Time `json:"time"`
	} `json:"store_error"`
	Version struct {
		Version string `json:"version"`
	} `json:"version"`
}

// storeStatusOf runs pinfs status dir --json and decodes it.
func storeStatusOf(t testing.TB, dir string) (storeStatus, result) {
	t.Helper()
	r := pinfs(t, nil, "status", dir, "--json")
	var st storeStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Serving == nil {
		t.Fatalf("pinfs status %s --json: stdout is not a status (%v):\n%v", dir, err, r)
	}
	return st, r
}

// TestMountChecksTheStore: a mount tells the truth about the store
// (issue 24 item 3). With a warm cache dir a wrong secret fails the mount
// as it does with a fresh one; an unreachable store still mounts from
// the cache, with a warning, and pinfs status says so; credentials the
// store refuses mid-run make pinfs status exit 1 (and --wait wait) until
// a fetch succeeds.
func TestMountChecksTheStore(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	p, err := faultproxy.New(f.s.Endpoint, faultproxy.Options{AccessKey: f.s.AccessKey, SecretKey: f.s.SecretKey, Region: f.s.Region})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	env := append(append([]string{}, f.env...), p.Env()...) // the later endpoint variables win
	cache := filepath.Join(f.work, "cache")
	dir := filepath.Join(f.work, "mnt")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := func(record string) []string {
		return []string{f.digest, dir, "--store", f.store, "--cache-dir", cache, "--run-record", filepath.Join(f.work, record)}
	}
	read := func(rel string) {
		t.Helper()
		if b, err := readFile(t, filepath.Join(dir, rel)); err != nil || !bytes.Equal(b, f.data[rel]) {
			t.Fatalf("read %s: %d bytes, %v; want the pinned bytes", rel, len(b), err)
		}
	}

	// 1. Good credentials: the snapshot and two members into the cache.
	d := startMount(t, env, dir, args("run1.jsonl")...)
	read("README")
	read("train/big.bin")
	if st, r := storeStatusOf(t, dir); r.code != 0 || st.StoreError != nil || st.Version.Version == "" {
		t.Fatalf("status with good credentials: %+v\n%v", st, r)
	}
	d.stop(t, 10*time.Second)
	fusetest.ForceUnmount(t, dir)

	// 2. A wrong secret on the warm cache dir: the mount fails, in one line,
	// as with a fresh cache dir, and nothing is mounted or recorded.
	const wrongSecret = "s3://store: the secret key is wrong (the signature does not match; check AWS_SECRET_ACCESS_KEY or the profile)"
	t.Cleanup(func() { fusetest.ForceUnmount(t, dir) }) // should it mount after all
	start := time.Now()
	r := pinfs(t, append(append([]string{}, env...), "AWS_SECRET_ACCESS_KEY=wrong"), append([]string{"mount"}, args("run2.jsonl")...)...)
	oneLineError(t, r, 1, "pinfs mount: manifest "+f.digest+": "+wrongSecret)
	if fusetest.Mounted(dir) {
		t.Fatalf("%s is mounted after a refused mount", dir)
	}
	if _, err := os.Stat(filepath.Join(f.work, "run2.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused mount wrote its run record: %v", err)
	}
	t.Logf("refused in %v", time.Since(start).Round(time.Millisecond))
	fresh := pinfs(t, append(append([]string{}, env...), "AWS_SECRET_ACCESS_KEY=wrong"),
		"mount", f.digest, dir, "--store", f.store, "--cache-dir", t.TempDir(), "--run-record", filepath.Join(f.work, "run2b.jsonl"))
	if fresh.stderr != r.stderr || fresh.code != r.code {
		t.Errorf("warm cache dir: %v\nfresh cache dir: %v\nwant the same", r, fresh)
	}

	// 3. The store unreachable: the mount serves the cached bytes, warns,
	// and pinfs status says why reads of other bytes will fail.
	refused := refusedEndpoint(t)
	down := append(append([]string{}, f.env...), "AWS_ENDPOINT_URL_S3="+refused, "AWS_ENDPOINT_URL="+refused)
	d = startMount(t, down, dir, append(args("run3.jsonl"), "--cache-mem", "0")...)
	read("README")
	read("train/big.bin")
	if log, _ := os.ReadFile(d.log); !strings.Contains(string(log), "the store did not answer the check at mount") ||
		!strings.Contains(string(log), "connection refused") {
		t.Errorf("no warning that the store is unreachable in the mount log:\n%s", log)
	}
	st, r := storeStatusOf(t, dir)
	if r.code != 0 || !*st.Serving || st.StoreError == nil || st.StoreError.Kind != "unreachable" ||
		!strings.Contains(st.StoreError.Message, "cannot reach S3 at "+refused) || st.StoreError.Time.Before(start) {
		t.Errorf("status with the store unreachable: want exit 0, serving, store_error unreachable; got %+v\n%v", st, r)
	}
	if r := mustPinfs(t, nil, "status", dir); !strings.Contains(r.stdout, "  store error: unreachable at ") {
		t.Errorf("text status does not say the store is unreachable:\n%v", r)
	}
	d.stop(t, 10*time.Second)
	fusetest.ForceUnmount(t, dir)

	// 4. Credentials that go bad mid-run (the proxy answers 403
	// AccessDenied to member GETs): not ready until a fetch succeeds.
	d = startMount(t, env, dir, args("run4.jsonl")...)
	if st, r := storeStatusOf(t, dir); r.code != 0 || st.StoreError != nil {
		t.Fatalf("status before the refusal: %+v\n%v", st, r)
	}
	deny := p.Inject(faultproxy.Rule{Method: "GET", Path: "/data/", Fault: faultproxy.Forbidden()})
	if _, err := readFile(t, filepath.Join(dir, "val/v.txt")); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("read of an uncached member with the credentials refused: %v, want EACCES", err)
	}
	if deny.Applied() == 0 {
		t.Fatal("the proxy refused no request")
	}
	st, r = storeStatusOf(t, dir)
	if r.code != 1 || *st.Serving || st.StoreError == nil || st.StoreError.Kind != "access" ||
		!strings.Contains(st.StoreError.Message, "access denied to s3://data/ds/val/v.txt") ||
		!strings.Contains(st.Error, "the store refuses the mount's credentials") {
		t.Errorf("status with the credentials refused: want exit 1, not serving, store_error access; got %+v\n%v", st, r)
	}
	r = pinfs(t, nil, "status", dir)
	oneLineError(t, r, 1, "pinfs status: "+dir+": the store refuses the mount's credentials (last refused at ")
	if !strings.Contains(r.stderr, "access denied to s3://data/ds/val/v.txt") {
		t.Errorf("text status does not name the refusal: %v", r)
	}
	// Cached bytes still read: the refusal is reported, not served.
	read("README")
	if st, r := storeStatusOf(t, dir); r.code != 1 || st.StoreError == nil || st.StoreError.Kind != "access" {
		t.Errorf("a cache hit cleared the refusal: %+v\n%v", st, r)
	}

	// --wait waits through the refusal, and returns once a fetch succeeds.
	waited := make(chan result, 1)
	go func() { waited <- pinfs(t, nil, "status", dir, "--wait", "60s", "--timeout", "5s") }()
	select {
	case r := <-waited:
		t.Fatalf("pinfs status --wait returned while the store refuses: %v", r)
	case <-time.After(1500 * time.Millisecond):
	}
	p.Clear()
	read("train/mid.bin") // not cached: fetched, with the credentials taken again
	select {
	case r := <-waited:
		if r.code != 0 || !strings.Contains(r.stdout, " serving "+f.digest) {
			t.Errorf("pinfs status --wait after a fetch succeeded: %v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("pinfs status --wait did not return within 30 s of a fetch that succeeded")
	}
	if st, r := storeStatusOf(t, dir); r.code != 0 || !*st.Serving || st.StoreError != nil {
		t.Errorf("status after a fetch succeeded: want exit 0, no store_error; got %+v\n%v", st, r)
	}
}
