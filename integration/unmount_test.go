package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/faultproxy"
	"github.com/pinfs/pinfs/integration/fusetest"
	"github.com/pinfs/pinfs/integration/s3test"
)

// TestUnmountWaitsForRunEnd: pinfs unmount returns once the daemon has
// written run_end and exited, so pinfs run show right after it (as the
// README quick start does) shows the run ended, with what it read. The
// daemon reaches the store and an S3 run record through a proxy that adds
// 150 ms to every response, so its last writes take a while after the
// unmount; the test's own commands go to the server directly.
func TestUnmountWaitsForRunEnd(t *testing.T) {
	t.Parallel()
	fusetest.Require(t)
	s := s3test.Start(t)
	dataset(t, s)
	st, record := "s3://store/pinfs", "s3://store/runs"
	d := mustPinfs(t, s.Env(), "pin", "s3://data/ds/", "--store", st).lastLine()
	p, err := faultproxy.New(s.Endpoint, faultproxy.Options{Shape: faultproxy.Shape{Latency: 150 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	slow := append(s.Env(), p.Env()...) // the later endpoint variables win

	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fusetest.ForceUnmount(t, mnt) })
	mustPinfs(t, slow, "mount", d, mnt, "--store", st, "--cache-dir", t.TempDir(), "--run-record", record, "--run-id", "unmount-1")
	if b, err := os.ReadFile(filepath.Join(mnt, "train", "b.txt")); err != nil || string(b) != "bravo\n" {
		t.Fatalf("read through the mount: %q, %v", b, err)
	}
	start := time.Now()
	mustPinfs(t, slow, "unmount", mnt)
	took := time.Since(start)
	if fusetest.Mounted(mnt) {
		t.Fatalf("%s is still mounted after pinfs unmount", mnt)
	}
	show := mustPinfs(t, s.Env(), "run", "show", "unmount-1", "--run-record", record, "--store", st)
	if !strings.Contains(show.stdout, "run unmount-1  "+d+"  ended\n") || !strings.Contains(show.stdout, "consumed  1 members opened, 1 read in full") {
		t.Errorf("pinfs run show right after pinfs unmount (which took %v):\n%s\nwant the run ended, with the one member it read", took, show.stdout)
	}
}

// TestUnmountWaitsWhileTheStoreRefuses: a mount whose store has refused
// its credentials does not count as serving (pinfs status exits 1), but
// its daemon still answers and still writes run_end: pinfs unmount waits
// for it as for any other. The store refuses member reads only (403 on
// GET /data/), so the run record in S3, 150 ms away, still takes writes.
func TestUnmountWaitsWhileTheStoreRefuses(t *testing.T) {
	t.Parallel()
	fusetest.Require(t)
	s := s3test.Start(t)
	dataset(t, s)
	st, record := "s3://store/pinfs", "s3://store/runs"
	d := mustPinfs(t, s.Env(), "pin", "s3://data/ds/", "--store", st).lastLine()
	p, err := faultproxy.New(s.Endpoint, faultproxy.Options{Shape: faultproxy.Shape{Latency: 150 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	slow := append(s.Env(), p.Env()...) // the later endpoint variables win

	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fusetest.ForceUnmount(t, mnt) })
	mustPinfs(t, slow, "mount", d, mnt, "--store", st, "--cache-dir", t.TempDir(), "--run-record", record, "--run-id", "unmount-2")
	if b, err := os.ReadFile(filepath.Join(mnt, "train", "b.txt")); err != nil || string(b) != "bravo\n" {
		t.Fatalf("read through the mount: %q, %v", b, err)
	}
	p.Inject(faultproxy.Rule{Method: "GET", Path: "/data/", Fault: faultproxy.Forbidden()})
	if _, err := os.ReadFile(filepath.Join(mnt, "val", "c.txt")); err == nil {
		t.Fatal("read of an uncached member while the store refuses: no error")
	}
	if r := pinfs(t, nil, "status", mnt); r.code != 1 || !strings.Contains(r.stderr, "the store refuses the mount's credentials") {
		t.Fatalf("pinfs status while the store refuses: %v", r)
	}
	start := time.Now()
	mustPinfs(t, slow, "unmount", mnt)
	took := time.Since(start)
	show := mustPinfs(t, s.Env(), "run", "show", "unmount-2", "--run-record", record, "--store", st)
	if !strings.Contains(show.stdout, "run unmount-2  "+d+"  ended\n") {
		t.Errorf("pinfs run show right after pinfs unmount of a refused mount (which took %v):\n%s\nwant the run ended", took, show.stdout)
	}
}
