package mount

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/fs"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// logLines returns a logger that writes JSON lines into b, and a function
// that decodes them.
func logLines(t *testing.T) (*slog.Logger, func() []map[string]any) {
	var b bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return log, func() []map[string]any {
		var out []map[string]any
		for l := range strings.Lines(b.String()) {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("log line %q: %v", l, err)
			}
			out = append(out, m)
		}
		return out
	}
}

// passthroughLines returns the "passthrough on" and "passthrough off" lines of lines.
func passthroughLines(lines []map[string]any) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if msg, _ := l["msg"].(string); strings.HasPrefix(msg, "passthrough ") {
			out = append(out, l)
		}
	}
	return out
}

// TestPassthroughOf: --passthrough=false and a mount without a disk tier
// give the tree no switch (every open as before) and say why; otherwise
// the tree gets the switch, off until the probe.
func TestPassthroughOf(t *testing.T) {
	for _, c := range []struct {
		name   string
		c      Config
		reason string
	}{
		{"disabled", Config{Passthrough: false, CacheDisk: 1 << 30}, fs.ReasonDisabled},
		{"no disk", Config{Passthrough: true, CacheDisk: 0}, fs.ReasonNoDisk},
		{"to probe", Config{Passthrough: true, CacheDisk: 1 << 30}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			pt, tree, reason := passthroughOf(&c.c)
			if reason != c.reason || (tree == nil) != (c.reason != "") || (tree != nil && tree != pt) {
				t.Fatalf("passthroughOf: tree switch %v, reason %q; want reason %q", tree, reason, c.reason)
			}
			if st := pt.Status(); st.Enabled || st.Reason != c.reason {
				t.Errorf("status before the probe %+v, want off with reason %q", st, c.reason)
			}
		})
	}
}

// TestProbePassthroughLogsOnce: with a reason already, the probe is not
// made and one line says "passthrough off" with it; otherwise the probe
// file is made in the cache dir, 0400, and one line says the outcome,
// "passthrough on" as root on this kernel.
func TestProbePassthroughLogsOnce(t *testing.T) {
	dir := t.TempDir()
	log, lines := logLines(t)
	pt := &fs.Passthrough{}
	probePassthrough(nil, pt, dir, fs.ReasonDisabled, log) // no server: the probe must not be made
	got := passthroughLines(lines())
	if len(got) != 1 || got[0]["msg"] != "passthrough off" || got[0]["reason"] != fs.ReasonDisabled || got[0]["level"] != "INFO" {
		t.Fatalf("log %v, want one info line passthrough off with reason %q", got, fs.ReasonDisabled)
	}
	if _, err := os.Lstat(filepath.Join(dir, probeName)); !os.IsNotExist(err) {
		t.Errorf("probe file made without a probe: %v", err)
	}

	server := mountTrivial(t)
	log, lines = logLines(t)
	probePassthrough(server, pt, dir, "", log)
	got = passthroughLines(lines())
	st := pt.Status()
	if len(got) != 1 || got[0]["level"] != "INFO" {
		t.Fatalf("log %v, want one info line", got)
	}
	if st.Enabled && (got[0]["msg"] != "passthrough on" || got[0]["reason"] != nil) ||
		!st.Enabled && (got[0]["msg"] != "passthrough off" || got[0]["reason"] != st.Reason || st.Reason == "") {
		t.Errorf("log %v does not match status %+v", got, st)
	}
	if os.Geteuid() == 0 && !st.Enabled {
		t.Errorf("passthrough off as root on this kernel: %s", st.Reason)
	}
	info, err := os.Lstat(filepath.Join(dir, probeName))
	if err != nil || !info.Mode().IsRegular() || info.Mode().Perm() != 0o400 {
		t.Errorf("probe file: %v, %v; want a regular file, mode 0400", info, err)
	}
}

// mountTrivial mounts an empty snapshot and returns its server; the test
// unmounts it at its end.
func mountTrivial(t *testing.T) *fuse.Server {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but FUSE is not available: %v", err)
		}
		t.Skipf("FUSE not available: %v", err)
	}
	snap, err := verifytest.Snapshot(nil, "probe test")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	server, err := fs.Mount(dir, fs.NewRoot(snap, nil, fs.Options{Mtime: time.Unix(0, 0)}), fs.MountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := server.Unmount(); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return server
}

// TestFilesPassedThrough: a passthrough open counts the member opened and
// read in full though no read came, and the consumed event written next
// carries it in its passthrough members; without one, the event has no
// passthrough field at all, as before issue 25. The stub block reader has
// no backing files.
func TestFilesPassedThrough(t *testing.T) {
	data := bytes.Repeat([]byte("passthrough "), 10_000)
	f := filesOf(t, data)
	if bf, ok := f.Backing(context.Background(), 0); ok || bf != nil {
		t.Errorf("Backing from the stub: %v, %v; want none", bf, ok)
	}
	record := filepath.Join(t.TempDir(), "runs.jsonl")
	rec, err := runrecord.Open(context.Background(), runrecord.Options{URL: record, RunID: "r1", Digest: digestOf(t, f.members)})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(context.Background())
	log, _ := logLines(t)

	emitConsumed(context.Background(), rec, f.tracker, log) // nothing yet
	f.PassedThrough(0)
	s := f.tracker.Set()
	if !s.Opened.Contains(0) || !s.Full.Contains(0) || f.tracker.MembersOpened() != 1 {
		t.Errorf("after a passthrough open: opened %v full %v, %d members opened; want member 0 opened and full", s.Opened, s.Full, f.tracker.MembersOpened())
	}
	emitConsumed(context.Background(), rec, f.tracker, log)

	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	var events []map[string]any
	for l := range strings.Lines(string(b)) {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		if e["event"] == runrecord.ConsumedSet {
			events = append(events, e)
		}
	}
	if len(events) != 2 {
		t.Fatalf("%d consumed events, want 2:\n%s", len(events), b)
	}
	if _, ok := events[0]["passthrough"]; ok {
		t.Errorf("a delta without passthrough opens has a passthrough field: %v", events[0])
	}
	text, _ := events[1]["passthrough"].(string)
	got, err := consumed.NewDecoder(f.members).DecodeMembers(text)
	if err != nil || got.GetCardinality() != 1 || !got.Contains(0) {
		t.Errorf("passthrough members %q decode as %v (%v), want [0]", text, got, err)
	}
}

// digestOf is the digest a record binds the run of table t's snapshot to;
// any valid digest does.
func digestOf(t *testing.T, _ *verify.Table) verify.Digest {
	t.Helper()
	return verify.Digest("sha256:" + strings.Repeat("ab", 32))
}
