package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/fusetest"
)

// daemon is a `pinfs mount --foreground` child process.
type daemon struct {
	cmd    *exec.Cmd
	dir    string
	log    string
	exited chan struct{}
	err    error
}

// startMount runs pinfs mount --foreground with args (the digest, the
// mountpoint, flags) and waits until dir is a pinfs mount and the daemon
// says it serves (a dead mount may still be listed at dir). The daemon is
// stopped and the mount removed in t.Cleanup, also when the test fails.
func startMount(t testing.TB, env []string, dir string, args ...string) *daemon {
	t.Helper()
	return startMountEnv(t, append(os.Environ(), env...), dir, args...)
}

// startMountEnv is startMount with env the whole environment of the daemon.
func startMountEnv(t testing.TB, env []string, dir string, args ...string) *daemon {
	t.Helper()
	return startMountBin(t, pinfsBin, env, dir, args...)
}

// startMountBin is startMountEnv with the pinfs binary bin.
func startMountBin(t testing.TB, bin string, env []string, dir string, args ...string) *daemon {
	t.Helper()
	fusetest.Require(t)
	log := filepath.Join(t.TempDir(), "mount.log")
	lf, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"mount"}, append(args, "--foreground")...)...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lf.Close()
	d := &daemon{cmd: cmd, dir: dir, log: log, exited: make(chan struct{})}
	go func() { d.err = cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		d.stop(t, 10*time.Second)
		fusetest.ForceUnmount(t, dir)
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("pinfs mount log:\n%s", b)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _ := os.ReadFile(log)
		if fusetest.Mounted(dir) && strings.Contains(string(out), " serving ") {
			return d
		}
		select {
		case <-d.exited:
			b, _ := os.ReadFile(log)
			t.Fatalf("pinfs mount exited (%v) before mounting:\n%s", d.err, b)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log)
			t.Fatalf("pinfs mount not ready after 30s:\n%s", b)
		}
	}
}

// stop sends SIGTERM and waits up to timeout, then kills.
func (d *daemon) stop(t testing.TB, timeout time.Duration) {
	select {
	case <-d.exited:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(timeout):
		t.Errorf("pinfs mount did not exit within %v of SIGTERM; killing it", timeout)
		d.cmd.Process.Kill()
		<-d.exited
	}
}

// exitCode waits (bounded) for the daemon to exit and returns its code.
func (d *daemon) exitCode(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-d.exited:
	case <-time.After(timeout):
		t.Fatalf("pinfs mount still running after %v", timeout)
	}
	if d.err == nil {
		return 0
	}
	if ee, ok := d.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// inMount runs f with a bound on time: a read stuck in a hung daemon
// fails the test instead of hanging it (the stuck goroutine is abandoned
// and freed when cleanup aborts the connection).
func inMount[T any](t testing.TB, timeout time.Duration, f func() (T, error)) (T, error) {
	t.Helper()
	type res struct {
		v   T
		err error
	}
	ch := make(chan res, 1)
	go func() { v, err := f(); ch <- res{v, err} }()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		t.Fatalf("filesystem call did not return within %v", timeout)
		return zero, fmt.Errorf("timeout")
	}
}
