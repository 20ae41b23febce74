package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// reasonOf returns the reason a "passthrough off" log line gives (text
// or JSON format), or "" when it gives none.
func reasonOf(line string) string {
	m := regexp.MustCompile(`reason"?[=:]("[^"]+"|[^\s"]+)`).FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	return m[1]
}

// wantOff waits for the mount's passthrough decision in log and fails the
// test unless passthrough is off with a reason.
func wantOff(t testing.TB, log string) {
	t.Helper()
	line, on := waitPassthrough(t, log)
	if on || reasonOf(line) == "" {
		t.Fatalf("want passthrough off with a reason, the mount logged: %s", line)
	}
	t.Logf("the mount logged: %s", line)
}

// runEndTotals returns the totals of the only run_end of runID in the
// case's record.
func (c *runsCase) runEndTotals(t *testing.T, runID string) map[string]any {
	t.Helper()
	ends := c.recordEvents(t, runID, "run_end")
	if len(ends) != 1 {
		t.Fatalf("%d run_end events of run %s, want 1", len(ends), runID)
	}
	tot, _ := ends[0]["totals"].(map[string]any)
	return tot
}

// TestPassthroughRunIsOpenedAndFull: reads of a passthrough open never
// reach the daemon, so the run record counts a member served by
// passthrough as opened and read in full, though only its first page was
// read; run_end counts the passthrough open and run show names it. A
// member read as today is counted exactly.
func TestPassthroughRunIsOpenedAndFull(t *testing.T) {
	t.Parallel()
	c := newRunsCase(t, func(f *fixture) string { return filepath.Join(f.work, "runs.jsonl") })
	c.f.warmMember(t, c.cache, big)
	const runID = "run-pt"
	dir, d := c.f.mountPT(t, c.cache, c.record, "--run-id", runID, "--flush-interval", "1s")
	child := openInChild(t, filepath.Join(dir, big), 4096)
	head, err := child.next(t)
	child.cmd.Process.Kill() // closes it, the rest unread
	child.cmd.Wait()
	if err != nil || !bytes.Equal(head, c.f.data[big][:4096]) {
		t.Fatalf("first page of %s: %v", big, err)
	}
	if _, pt := ptStatus(t, dir); pt.Opens != 1 {
		t.Fatalf("the warmed %s was not served by passthrough: %+v", big, pt)
	}
	c.readWhole(t, dir, "README")
	d.stop(t, 30*time.Second)
	if code := d.exitCode(t, time.Second); code != 0 {
		t.Fatalf("the mount exited %d", code)
	}

	c.checkConsumed(t, "a passthrough run", c.show(t, runID), consumedWant{
		big:      {int64(len(c.f.data[big])), true},
		"README": {int64(len(c.f.data["README"])), true},
	})
	if tot := c.runEndTotals(t, runID); tot["passthrough_opens"] != 1.0 {
		t.Errorf("run_end totals %v, want passthrough_opens 1", tot)
	}
	var rep struct {
		Passthrough *struct{ Members int64 }
		Members     []struct {
			Path        string
			Passthrough bool
		}
	}
	out := c.pinfsRun(t, 0, "show", runID, "--members", "--json").stdout
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("pinfs run show --json: %v\n%s", err, out)
	}
	if rep.Passthrough == nil || rep.Passthrough.Members != 1 {
		t.Errorf("run show --json: passthrough %+v, want 1 member", rep.Passthrough)
	}
	for _, m := range rep.Members {
		if m.Passthrough != (m.Path == big) {
			t.Errorf("run show --members --json: %s passthrough %t, want %t", m.Path, m.Passthrough, m.Path == big)
		}
	}
	if text := c.pinfsRun(t, 0, "show", runID).stdout; !lineWith(text, "passthrough  1 members served by the kernel", "(1 opens)") {
		t.Errorf("run show does not say that one member was served by passthrough:\n%s", text)
	}
}

// TestPassthroughOffByFlag: with --passthrough=false a warmed member is
// served by the daemon as before issue 25: the mount logs why passthrough
// is off, status says so and counts no passthrough open, and the consumed
// set is exact (a page read is a page, not the whole member).
func TestPassthroughOffByFlag(t *testing.T) {
	t.Parallel()
	c := newRunsCase(t, func(f *fixture) string { return filepath.Join(f.work, "runs.jsonl") })
	c.f.warmMember(t, c.cache, big)
	const runID = "run-off"
	dir, d := c.f.mount(t, c.cache, c.record, "--run-id", runID, "--passthrough=false")
	wantOff(t, d.log)
	before, pt := ptStatus(t, dir)
	if pt.Enabled || pt.Reason == "" {
		t.Errorf("status with --passthrough=false: passthrough %+v, want disabled with a reason", pt)
	}
	c.readPart(t, dir, big, 0, 4096)
	after, pt := ptStatus(t, dir)
	if pt.Opens != 0 || pt.Bytes != 0 || after.BytesServed < before.BytesServed+4096 {
		t.Errorf("with --passthrough=false: passthrough %+v, bytes_served %d -> %d; want the daemon to serve",
			pt, before.BytesServed, after.BytesServed)
	}
	d.stop(t, 30*time.Second)

	c.checkConsumed(t, "--passthrough=false", c.show(t, runID), consumedWant{big: {4096, false}})
	if n, ok := c.runEndTotals(t, runID)["passthrough_opens"]; ok && n != 0.0 {
		t.Errorf("run_end passthrough_opens %v with --passthrough=false", n)
	}
}

// TestNonRootPassthroughFallsBack: a user's mount lacks CAP_SYS_ADMIN,
// which registering a backing file needs: it logs once why passthrough is
// off and serves a warmed member itself, with the pinned bytes. (It
// changes machine state, as every non-root test does: no t.Parallel.)
func TestNonRootPassthroughFallsBack(t *testing.T) {
	m := nonRootFixture(t)
	if r := m.asUser(t, "warm", m.f.digest, big, "--store", m.f.store, "--cache-dir", m.cache); r.code != 0 {
		t.Fatalf("pinfs warm as nobody: %v", r)
	}
	if fi, err := os.Lstat(memberFile(m.cache, m.f.data[big])); err != nil || fi.Mode().Perm() != 0o400 {
		t.Fatalf("no whole-member file after nobody's warm: %v %v", fi, err)
	}
	_, log := m.mount(t)
	wantOff(t, log)
	m.wantServed(t, big)
	m.wantServed(t, "README")
	waitPassthrough(t, log) // still said once
}
