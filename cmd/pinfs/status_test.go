package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/pinfs/pinfs/cmd/internal/mountstatus"
	pfs "github.com/pinfs/pinfs/fs"
	"github.com/pinfs/pinfs/integration/fusetest"
	"github.com/pinfs/pinfs/verify"
)

// statusRun runs pinfs status with args in-process.
func statusRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runPinfs(t, append([]string{"status"}, args...)...)
}

func TestMountpointArg(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	digest := "sha256:" + strings.Repeat("ab", 32)
	if err := os.Mkdir(digest, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Mkdir("sha256:abc", 0o700)
	for arg, want := range map[string]bool{
		digest:                     false, // a full digest is a snapshot, even where a directory has its name
		"./" + digest:              true,
		"sha256:" + "00":           false, // a mistyped digest stays a usage error
		"sha256:abc":               true,  // ... unless a path of that name exists
		dir:                        true,
		filepath.Join(dir, "nope"): true,
		"/data/" + digest:          true,
		"":                         false,
	} {
		if got := mountpointArg(arg); got != want {
			t.Errorf("mountpointArg(%q) = %v, want %v", arg, got, want)
		}
	}
}

func TestStatusOfNotAMount(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := statusRun(t, dir)
	if code != exitFailed || out != "" || errs != "pinfs status: "+dir+" is not a pinfs mount\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}

	// --json prints the status in every case; --store and --policy are ignored.
	code, out, errs = statusRun(t, dir, "--json", "--store", "s3://nowhere/p", "--policy", "/nonexistent")
	var st struct {
		Mountpoint string `json:"mountpoint"`
		Serving    *bool  `json:"serving"`
		Error      string `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("--json stdout %q: %v", out, err)
	}
	want := dir + " is not a pinfs mount"
	if code != exitFailed || st.Mountpoint != dir || st.Serving == nil || *st.Serving || st.Error != want ||
		errs != "pinfs status: "+want+"\n" {
		t.Errorf("--json: exit %d, status %+v, stderr %q", code, st, errs)
	}

	// --wait asks again until the wait has passed, and still reports why
	// at the end.
	start := time.Now()
	code, _, errs = statusRun(t, dir, "--wait", "300ms", "--timeout", "1s")
	if elapsed := time.Since(start); elapsed < 300*time.Millisecond {
		t.Errorf("--wait 300ms gave up after %v", elapsed)
	}
	if code != exitFailed || errs != "pinfs status: "+want+"\n" {
		t.Errorf("--wait: exit %d, stderr %q", code, errs)
	}
}

// TestStatusWaitsForTheMount: without --wait, status of a directory that
// is not yet a pinfs mount fails at once; with --wait it succeeds once a
// mount appears there, a second later, and not before.
func TestStatusWaitsForTheMount(t *testing.T) {
	fusetest.Require(t)
	mnt := t.TempDir()
	code, out, errs := statusRun(t, mnt)
	if want := "pinfs status: " + mnt + " is not a pinfs mount\n"; code != exitFailed || out != "" || errs != want {
		t.Fatalf("before the mount, without --wait: exit %d, stdout %q, stderr %q; want exit 1, %q", code, out, errs, want)
	}

	const delay = time.Second
	digest := "sha256:" + strings.Repeat("ab", 32)
	mounted := make(chan *fuse.Server, 1)
	var mounting atomic.Int64 // when the mount began, in UnixNano
	start := time.Now()
	go func() {
		time.Sleep(delay)
		mounting.Store(time.Now().UnixNano())
		srv, err := pfs.Mount(mnt, &statusRoot{digest: digest}, pfs.MountOptions{Name: digest})
		if err != nil {
			t.Errorf("mounting the fake daemon: %v", err)
		}
		mounted <- srv
	}()
	t.Cleanup(func() {
		select {
		case srv := <-mounted:
			if srv != nil {
				srv.Unmount()
			}
		case <-time.After(30 * time.Second):
			t.Errorf("the fake daemon did not mount within 30 s")
		}
		fusetest.ForceUnmount(t, mnt)
	})

	code, out, errs = statusRun(t, mnt, "--wait", "30s", "--timeout", "5s")
	returned, began := time.Now(), mounting.Load()
	if code != exitOK || !strings.HasPrefix(out, mnt+" serving "+digest+" ") || errs != "" {
		t.Fatalf("--wait 30s: exit %d, stdout %q, stderr %q; want exit 0, serving %s", code, out, errs, digest)
	}
	if began == 0 || returned.UnixNano() < began || returned.Sub(start) < delay {
		t.Errorf("--wait answered %v after its start, before the mount began (%d)", returned.Sub(start), began)
	}
}

// statusRoot is the root of a fake pinfs daemon: it answers the status
// attribute, serving digest, and nothing else.
type statusRoot struct {
	gofs.Inode
	digest string
}

var _ = (gofs.NodeGetxattrer)((*statusRoot)(nil))

// Getxattr answers pfs.XattrStatus following getxattr(2).
func (r *statusRoot) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if attr != pfs.XattrStatus {
		return 0, syscall.ENODATA
	}
	b, err := json.Marshal(&mountstatus.Status{Serving: true, Digest: r.digest, RunID: "run-1", PID: os.Getpid()})
	if err != nil {
		return 0, syscall.EIO
	}
	if len(dest) == 0 {
		return uint32(len(b)), 0
	}
	if len(dest) < len(b) {
		return uint32(len(b)), syscall.ERANGE
	}
	return uint32(copy(dest, b)), 0
}

func TestStatusOfMissingPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	code, out, errs := statusRun(t, dir)
	if code != exitFailed || out != "" || errs != "pinfs status: "+dir+" does not exist\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestStatusUsage: the digest form is as it was; bad durations are usage
// errors.
func TestStatusUsage(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sha256:00"}, `pinfs status: "sha256:00": ` + verify.ErrNotDigest.Error() + "; a digest prefix is not a name: pinfs list --store STORE lists the full digests"},
		{[]string{"sha256:" + strings.Repeat("0", 64), "--store", ""}, "pinfs status: --store is required (or set PINFS_STORE)"},
		{[]string{}, "pinfs status: want exactly one DIGEST or MOUNTPOINT, got 0 arguments"},
		{[]string{dir, "--timeout", "0s"}, "pinfs status: --timeout 0s: want a positive duration such as 5s"},
		{[]string{dir, "--wait", "-1s"}, "pinfs status: --wait -1s: want a duration such as 2m, or 0 to ask once"},
	} {
		code, out, errs := statusRun(t, c.args...)
		if code != exitUsage || out != "" || strings.TrimSpace(errs) != c.want {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2, %q", c.args, code, out, errs, c.want)
		}
	}
}
