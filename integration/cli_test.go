package integration

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pinfsBin is the pinfs binary built once for the package by TestMain.
var pinfsBin string

// parallel is how many integration tests run at once (t.Parallel) unless
// -test.parallel says otherwise. They mostly wait (on versitygw, the
// kernel, timeouts), not compute, so more of them than the default
// GOMAXPROCS overlap well on a small machine.
const parallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		flag.Set("test.parallel", strconv.Itoa(parallel))
	}
	dir, err := os.MkdirTemp("", "pinfs-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The binary is built with -race, whose runtime sleeps a second at
	// every exit; the suite runs pinfs a few thousand times.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	// pinfs ls, verify --no-head, validate, diff and run show keep the
	// tables they load in the default cache dir: the suite's go to a dir
	// of its own, not to the user's (or root's) ~/.cache/pinfs, where an
	// earlier run's copies would outlive it.
	os.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "xdg-cache"))
	pinfsBin = filepath.Join(dir, "pinfs")
	build := exec.Command("go", "build", "-race", "-o", pinfsBin, "../cmd/pinfs")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building pinfs:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one finished pinfs run.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// lastLine returns the last non-empty line of stdout.
func (r result) lastLine() string {
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	return lines[len(lines)-1]
}

// pinfs runs the binary with env added to the environment, bounded by a
// timeout, and returns its exit code and output.
func pinfs(t testing.TB, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, pinfsBin, args...)
	cmd.Env = append(os.Environ(), env...)
	return runCmd(t, cmd)
}

// runCmd runs a prepared pinfs command (bounded by its context) and
// returns its exit code and output; it fails the test when pinfs could
// not be run at all.
func runCmd(t testing.TB, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	return r
}

// mustPinfs runs pinfs and fails the test unless it exits 0.
func mustPinfs(t testing.TB, env []string, args ...string) result {
	t.Helper()
	r := pinfs(t, env, args...)
	if r.code != 0 {
		t.Fatalf("pinfs %s: %v", strings.Join(args, " "), r)
	}
	return r
}

// wantExit runs pinfs and fails the test unless it exits with code and
// its output contains every string in want.
func wantExit(t testing.TB, env []string, code int, want []string, args ...string) result {
	t.Helper()
	r := pinfs(t, env, args...)
	if r.code != code {
		t.Fatalf("pinfs %s: want exit %d, got %v", strings.Join(args, " "), code, r)
	}
	for _, w := range want {
		if !strings.Contains(r.stdout+r.stderr, w) {
			t.Fatalf("pinfs %s: output lacks %q: %v", strings.Join(args, " "), w, r)
		}
	}
	return r
}
