package integration

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
	unmountThenShow(t, false)
}

// TestUnmountWaitsForRunEndWhenTheStoreRefuses: the same when the store
// refused the mount's last fetch for access (the keys were rotated), so
// that pinfs status of the mount exits 1: the daemon still answers with
// its pid, and pinfs unmount still waits for it.
func TestUnmountWaitsForRunEndWhenTheStoreRefuses(t *testing.T) {
	unmountThenShow(t, true)
}

// unmountThenShow mounts through a slow proxy, reads a member (and, with
// refuse, has the store refuse the read of another), unmounts and checks
// that pinfs run show right after it sees the run ended.
func unmountThenShow(t *testing.T, refuse bool) {
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
	if refuse {
		p.Inject(faultproxy.Rule{Method: "GET", Path: "/data/", Fault: faultproxy.Forbidden()})
		if _, err := os.ReadFile(filepath.Join(mnt, "val", "c.txt")); !errors.Is(err, syscall.EACCES) {
			t.Fatalf("read with the store refusing: %v, want EACCES", err)
		}
		wantExit(t, nil, 1, []string{"the store refuses the mount's credentials"}, "status", mnt)
	}
	start := time.Now()
	mustPinfs(t, slow, "unmount", mnt)
	took := time.Since(start)
	if fusetest.Mounted(mnt) {
		t.Fatalf("%s is still mounted after pinfs unmount", mnt)
	}
	show := mustPinfs(t, s.Env(), "run", "show", "unmount-1", "--run-record", record, "--store", st)
	opened := "consumed  1 members opened, 1 read in full"
	if refuse {
		opened = "consumed  2 members opened, 1 read in full"
	}
	if !strings.Contains(show.stdout, "run unmount-1  "+d+"  ended\n") || !strings.Contains(show.stdout, opened) {
		t.Errorf("pinfs run show right after pinfs unmount (which took %v):\n%s\nwant the run ended, with %q", took, show.stdout, opened)
	}
}
