package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/fusetest"
)

// TestLogsJSON: with --log-format json every line pinfs mount writes on
// stderr, from the start to the unmount on SIGTERM and including go-fuse's
// own (--debug logs every FUSE request), is one JSON object naming the
// mount's digest and run id.
func TestLogsJSON(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	dir, d, runID := f.loggedMount(t, "--log-format", "json", "--debug")
	if b, err := readFile(t, filepath.Join(dir, "README")); err != nil || string(b) != string(f.data["README"]) {
		t.Fatalf("read README: %q, %v", b, err)
	}
	d.stop(t, 30*time.Second)
	if code := d.exitCode(t, time.Second); code != 0 {
		t.Fatalf("pinfs mount exited %d after SIGTERM", code)
	}
	var msgs []string
	for i, line := range stderrLines(t, d) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stderr line %d is not a JSON object (%v): %q", i+1, err, line)
		}
		if m["digest"] != f.digest || m["run_id"] != runID {
			t.Errorf("stderr line %d names digest %v run %v, want %s run %s: %q", i+1, m["digest"], m["run_id"], f.digest, runID, line)
		}
		if m["level"] == nil || m["time"] == nil {
			t.Errorf("stderr line %d lacks level or time: %q", i+1, line)
		}
		msg, _ := m["msg"].(string)
		msgs = append(msgs, msg)
	}
	wantMessages(t, msgs, "serving", "signalled: unmounting", `rx \d+: LOOKUP n1 +"README"`, `rx \d+: READ n\d+`)
}

// TestLogsText: in the default text format every line of a mount's
// stderr, up to an unmount by pinfs unmount, has digest= and run_id= with
// the mount's values.
func TestLogsText(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	dir, d, runID := f.loggedMount(t)
	mustPinfs(t, f.env, "unmount", dir)
	if code := d.exitCode(t, 30*time.Second); code != 0 {
		t.Fatalf("pinfs mount exited %d after pinfs unmount", code)
	}
	var msgs []string
	for i, line := range stderrLines(t, d) {
		if !strings.HasPrefix(line, "time=") || !strings.Contains(line, " level=") {
			t.Errorf("stderr line %d is not a text log line: %q", i+1, line)
		}
		for _, want := range []string{" digest=" + f.digest, " run_id=" + runID} {
			if !strings.Contains(line+" ", want+" ") {
				t.Errorf("stderr line %d lacks %s: %q", i+1, want, line)
			}
		}
		if m := regexp.MustCompile(` msg=("[^"]*"|\S+)`).FindStringSubmatch(line); m != nil {
			msgs = append(msgs, strings.Trim(m[1], `"`))
		}
	}
	wantMessages(t, msgs, "serving", "unmounted")
}

// TestLogsBackground: pinfs mount without --foreground passes
// --log-format on to its daemon: the daemon's log file holds JSON lines
// that name the digest and run id, besides the one line the daemon prints
// on stdout when it serves.
func TestLogsBackground(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	dir := filepath.Join(t.TempDir(), "m")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(f.work, "run.jsonl")
	t.Cleanup(func() { fusetest.ForceUnmount(t, dir) })
	r := mustPinfs(t, f.env, "mount", f.digest, dir, "--store", f.store, "--cache-dir", filepath.Join(f.work, "cache"),
		"--run-record", record, "--log-format", "json")
	m := regexp.MustCompile(`^run (\S+) mounted at .* \(pid (\d+), log (.+)\)\n$`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("mount output %q: want run R mounted at DIR (pid N, log FILE)", r.stdout)
	}
	runID, logPath := m[1], m[3]
	var pid int
	fmt.Sscan(m[2], &pid)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	mustPinfs(t, f.env, "unmount", dir)
	waitRunEnd(t, record, runID)
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %d is not a JSON object (%v): %q", i+1, err, line)
		}
		if e["digest"] != f.digest || e["run_id"] != runID {
			t.Errorf("log line %d names digest %v run %v, want %s run %s: %q", i+1, e["digest"], e["run_id"], f.digest, runID, line)
		}
		msg, _ := e["msg"].(string)
		msgs = append(msgs, msg)
	}
	wantMessages(t, msgs, "serving", "unmounted")
}

// loggedMount mounts the fixture with pinfs mount --foreground and extra
// flags, its stdout and stderr kept apart, waits until it serves and
// returns the mountpoint, the daemon (whose log is its stdout) and the run
// id it printed. The daemon is stopped and the mount removed in t.Cleanup.
func (f *fixture) loggedMount(t *testing.T, extra ...string) (string, *daemon, string) {
	t.Helper()
	fusetest.Require(t)
	work := t.TempDir()
	dir := filepath.Join(work, f.digest)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stdout, stderr := filepath.Join(work, "stdout"), filepath.Join(work, "stderr")
	args := append([]string{"mount", f.digest, dir, "--store", f.store, "--cache-dir", filepath.Join(work, "cache"),
		"--run-record", filepath.Join(work, "run.jsonl"), "--foreground"}, extra...)
	cmd := exec.Command(pinfsBin, args...)
	cmd.Env = append(os.Environ(), f.env...)
	outF, err := os.Create(stdout)
	if err != nil {
		t.Fatal(err)
	}
	defer outF.Close()
	errF, err := os.Create(stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer errF.Close()
	cmd.Stdout, cmd.Stderr = outF, errF
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, dir: dir, log: stdout, exited: make(chan struct{})}
	go func() { d.err = cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		d.stop(t, 10*time.Second)
		fusetest.ForceUnmount(t, dir)
		if t.Failed() {
			o, _ := os.ReadFile(stdout)
			e, _ := os.ReadFile(stderr)
			t.Logf("pinfs mount stdout:\n%s\nstderr:\n%s", o, e)
		}
	})
	serving := regexp.MustCompile(`(?m)^run (\S+) serving ` + regexp.QuoteMeta(f.digest) + ` at `)
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _ := os.ReadFile(stdout)
		if m := serving.FindSubmatch(out); m != nil && fusetest.Mounted(dir) {
			return dir, d, string(m[1])
		}
		select {
		case <-d.exited:
			t.Fatalf("pinfs mount exited (%v) before it served", d.err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("pinfs mount not serving after 30s")
		}
	}
}

// stderrLines returns the lines d wrote on stderr (next to its stdout
// file); there must be some.
func stderrLines(t *testing.T, d *daemon) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(d.log), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		t.Fatal("pinfs mount wrote nothing on stderr")
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// wantMessages fails t unless each pattern matches one of msgs: a check
// that the lines checked include those of the start, the reads and the
// unmount.
func wantMessages(t *testing.T, msgs []string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		re := regexp.MustCompile(`^` + p)
		found := false
		for _, m := range msgs {
			if re.MatchString(m) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no log line whose message starts with %q among %d lines", p, len(msgs))
		}
	}
}

// waitRunEnd waits, bounded, until the run record at path ends with
// run_end of runID.
func waitRunEnd(t *testing.T, path, runID string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if all := events(t, path, ""); len(all) > 0 && all[len(all)-1]["event"] == "run_end" && all[len(all)-1]["run_id"] == runID {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run_end for %s in %s after 30s", runID, path)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
