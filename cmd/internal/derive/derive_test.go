package derive

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/pin"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/derivations"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/verify"
	record "github.com/pinfs/pinfs/verify/derive"
)

// fixture is a local store holding one pinned input, a runner whose
// "mounts" are plain copies of the input's files (no FUSE), and a
// transform script outside the scratch dir that tests rewrite to change
// the code without changing the command line.
type fixture struct {
	st     *localstore.Store
	rn     *Runner
	input  verify.Digest
	script string // the transform's code
	runs   string // one line per run of the command
	work   string // the runner's WorkDir
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := localstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"train/a": "a\n", "val/b": "b\n", "c": "c\n"})
	split, err := pin.ParseSplitRule("dir")
	if err != nil {
		t.Fatal(err)
	}
	input, err := (&pin.Pinner{Store: st, Options: pin.Options{Split: split}}).Dir(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, input: input, work: t.TempDir()}
	tmp := t.TempDir()
	f.script, f.runs = filepath.Join(tmp, "transform.sh"), filepath.Join(tmp, "runs")
	f.setCode(t, `cp -r "$PINFS_INPUT_raw"/. "$PINFS_OUTPUT"/`)
	f.rn = &Runner{Store: st, WorkDir: f.work, Output: io.Discard, Log: slog.New(slog.DiscardHandler),
		mount: func(ctx context.Context, ins []record.Input, dir string) (func(), error) {
			for _, in := range ins {
				snap, err := verify.Load(ctx, st, in.Digest)
				if err != nil {
					return nil, err
				}
				copySnapshot(t, st, snap, filepath.Join(dir, in.Name))
			}
			return func() {
				for _, in := range ins {
					os.RemoveAll(filepath.Join(dir, in.Name))
				}
			}, nil
		}}
	return f
}

// setCode makes the transform script count its runs and then run code.
func (f *fixture) setCode(t *testing.T, code string) {
	t.Helper()
	s := "echo run >> " + f.runs + "\n" + code + "\n"
	if err := os.WriteFile(f.script, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// record returns the record of running the script over the input.
func (f *fixture) record(t *testing.T) *record.Record {
	t.Helper()
	r, err := record.New([]record.Input{{Name: "raw", Digest: f.input}}, "harvest@v1.4.2",
		map[string]string{"min": "5"}, []string{"sh", f.script}, "dir")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// runCount is how many times the command ran.
func (f *fixture) runCount(t *testing.T) int {
	b, err := os.ReadFile(f.runs)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "run\n")
}

// checkWorkRemoved fails when a scratch dir was left behind.
func (f *fixture) checkWorkRemoved(t *testing.T) {
	t.Helper()
	if es, _ := os.ReadDir(f.work); len(es) != 0 {
		t.Errorf("scratch dir left behind: %v", es)
	}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, s := range files {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// copySnapshot writes the members of snap, from the store's CAS, under dir.
func copySnapshot(t *testing.T, st *localstore.Store, snap *verify.Snapshot, dir string) {
	t.Helper()
	files := map[string]string{}
	for _, m := range snap.Members() {
		obj, err := store.NewCAS(m.CAS)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := st.ReadRange(context.Background(), obj, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		files[m.Path] = string(b)
	}
	writeFiles(t, dir, files)
}

var now = time.Date(2026, 12, 1, 13, 40, 0, 0, time.UTC)

// TestDeriveRecordsThenCaches: the first derive runs and records the
// output with the inputs as parents; the second is cached and runs
// nothing; --force runs again and reproduces it.
func TestDeriveRecordsThenCaches(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	r := f.record(t)
	res, err := Derive(ctx, f.rn, r, false, now)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Ran || res.Record.Key != r.Key || res.Record.Time != "2026-12-01T13:40:00Z" || f.runCount(t) != 1 {
		t.Fatalf("first derive: outcome %d, record %+v, %d runs; want Ran, one run", res.Outcome, res.Record, f.runCount(t))
	}
	out := res.Record.Output
	stored, err := derivations.ByKey(ctx, f.st, r.Key)
	if err != nil || stored.Output != out {
		t.Fatalf("stored record %+v, %v; want output %s", stored, err, out)
	}
	snap, err := verify.Load(ctx, f.st, out)
	if err != nil {
		t.Fatal(err)
	}
	m := snap.Manifest()
	if !slices.Equal(m.Parents, []verify.Digest{f.input}) || m.Transform != "harvest@v1.4.2" || snap.Table().Len() != 3 ||
		len(m.Sources) != 1 || m.Sources[0].URI != "dir:output" {
		t.Errorf("output manifest: parents %v, transform %q, %d members, sources %+v", m.Parents, m.Transform, snap.Table().Len(), m.Sources)
	}
	f.checkWorkRemoved(t)

	res, err = Derive(ctx, f.rn, f.record(t), false, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Cached || res.Record.Output != out || res.Record.Time != "2026-12-01T13:40:00Z" || f.runCount(t) != 1 {
		t.Fatalf("second derive: outcome %d, record %+v, %d runs; want Cached with the first record, no new run", res.Outcome, res.Record, f.runCount(t))
	}

	res, err = Derive(ctx, f.rn, f.record(t), true, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Reproduced || res.Record.Output != out || f.runCount(t) != 2 {
		t.Fatalf("--force: outcome %d, record %+v, %d runs; want Reproduced, a second run", res.Outcome, res.Record, f.runCount(t))
	}
	f.checkWorkRemoved(t)
}

// TestDeriveDrift: the code changes without a new version; --force and
// Check fail with a DriftError naming the members, and the record stays.
func TestDeriveDrift(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	res, err := Derive(ctx, f.rn, f.record(t), false, now)
	if err != nil {
		t.Fatal(err)
	}
	out := res.Record.Output
	f.setCode(t, `cp -r "$PINFS_INPUT_raw"/. "$PINFS_OUTPUT"/ && cd "$PINFS_OUTPUT" && echo x >> train/a && echo d > d && rm c && mv val/b train/b`)

	_, err = Derive(ctx, f.rn, f.record(t), true, now)
	var de *DriftError
	if !errors.As(err, &de) {
		t.Fatalf("--force after a code change: %v, want a DriftError", err)
	}
	if !slices.Equal(de.Changed, []string{"train/a"}) || !slices.Equal(de.Added, []string{"d", "train/b"}) ||
		!slices.Equal(de.Removed, []string{"c", "val/b"}) || de.Recorded != out || de.Rerun == out || de.Transform != "harvest@v1.4.2" {
		t.Errorf("drift %+v", de)
	}
	if stored, err := derivations.ByKey(ctx, f.st, res.Record.Key); err != nil || stored.Output != out {
		t.Errorf("after the drift the record is %+v, %v; want it kept with output %s", stored, err, out)
	}
	if err := Check(ctx, f.rn, res.Record); !errors.As(err, &de) || len(de.Changed) != 1 {
		t.Errorf("Check after a code change: %v, want the same DriftError", err)
	}
	f.setCode(t, `cp -r "$PINFS_INPUT_raw"/. "$PINFS_OUTPUT"/`)
	if err := Check(ctx, f.rn, res.Record); err != nil {
		t.Errorf("Check with the code restored: %v", err)
	}
	f.checkWorkRemoved(t)
}

// TestDeriveOutputGone: a record whose output manifest is gone from the
// store is not a cache hit: it is rerun and compared; when the recorded
// output is gone and the rerun differs, the drift says so.
func TestDeriveOutputGone(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	res, err := Derive(ctx, f.rn, f.record(t), false, now)
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(f.st.String(), verify.ManifestKey(res.Record.Output))
	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	res, err = Derive(ctx, f.rn, f.record(t), false, now)
	if err != nil || res.Outcome != Reproduced || f.runCount(t) != 2 {
		t.Fatalf("derive with the output gone: %+v, %v, %d runs; want Reproduced after a second run", res, err, f.runCount(t))
	}
	if ok, err := HasOutput(ctx, f.st, res.Record.Output); !ok || err != nil {
		t.Errorf("the rerun did not put the output back: %v, %v", ok, err)
	}
	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	f.setCode(t, `date +%s%N > "$PINFS_OUTPUT"/t`)
	var de *DriftError
	if _, err := Derive(ctx, f.rn, f.record(t), false, now); !errors.As(err, &de) || de.Missing != "recorded output not in the store" {
		t.Errorf("derive with the output gone and other code: %v, want a DriftError saying the output is gone", err)
	}
}

// TestRunFailures: a command that fails, writes nothing, or writes a
// symlink pins nothing, records nothing, and leaves no scratch dir.
func TestRunFailures(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ code, want string }{
		{"exit 3", "CMD exited with status 3 (sh)"},
		{"true", "CMD wrote no files to PINFS_OUTPUT"},
		{"mkdir $PINFS_OUTPUT/empty", "CMD wrote no files to PINFS_OUTPUT"},
		{`ln -s /etc/passwd "$PINFS_OUTPUT"/x`, "x: not a regular file"},
		{"kill -KILL $$", "CMD was killed by signal 9"},
	} {
		f := newFixture(t)
		f.setCode(t, c.code)
		_, err := Derive(ctx, f.rn, f.record(t), false, now)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.code, err, c.want)
		}
		if _, err := derivations.ByKey(ctx, f.st, f.record(t).Key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: a failed derivation was recorded (%v)", c.code, err)
		}
		f.checkWorkRemoved(t)
	}
}

// TestRunStopped: when ctx ends the command gets SIGTERM, not SIGKILL (its
// TERM trap runs), and the run fails.
func TestRunStopped(t *testing.T) {
	f := newFixture(t)
	term := f.runs + ".term"
	f.setCode(t, `trap 'echo TERM > `+term+`; exit 0' TERM; echo started > `+f.runs+`.started; while :; do sleep 0.05; done`)
	ctx, cancel := context.WithCancel(context.Background())
	go cancelWhenStarted(f.runs+".started", cancel)
	_, err := Derive(ctx, f.rn, f.record(t), false, now)
	if err == nil || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "CMD (sh) stopped") {
		t.Errorf("derive stopped: %v, want CMD (sh) stopped wrapping context.Canceled", err)
	}
	if b, err := os.ReadFile(term); string(b) != "TERM\n" {
		t.Errorf("the command's TERM trap did not run (%q, %v): it was not sent SIGTERM", b, err)
	}
	f.checkWorkRemoved(t)
}

// TestRunKilledAfterGrace: a command that outlives SIGTERM keeps running
// for killDelay and is then killed with SIGKILL.
func TestRunKilledAfterGrace(t *testing.T) {
	defer func(d time.Duration) { killDelay = d }(killDelay)
	killDelay = 300 * time.Millisecond
	f := newFixture(t)
	term, pidFile, alive, started := f.runs+".term", f.runs+".pid", f.runs+".alive", f.runs+".started"
	// The trap records each TERM and returns; the loop records that the
	// command still runs after one.
	f.setCode(t, `trap 'echo TERM >> `+term+`' TERM; echo $$ > `+pidFile+`; echo started > `+started+`
while :; do if [ -e `+term+` ]; then echo alive > `+alive+`; fi; sleep 0.05; done`)
	t.Cleanup(func() { // on a failure below, kill what is left of the command
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	var canceled time.Time
	go cancelWhenStarted(started, func() { canceled = time.Now(); cancel() })
	done := make(chan error, 1)
	go func() { _, err := Derive(ctx, f.rn, f.record(t), false, now); done <- err }()
	var err error
	select {
	case err = <-done:
	case <-time.After(killDelay + 30*time.Second):
		t.Fatalf("derive still running %v after SIGTERM: the command was never killed", killDelay+30*time.Second)
	}
	elapsed := time.Since(canceled) // canceled was set before cancel, which Derive waited for
	if err == nil || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "CMD (sh) stopped") {
		t.Errorf("derive stopped: %v, want CMD (sh) stopped wrapping context.Canceled", err)
	}
	if b, err := os.ReadFile(term); !strings.HasPrefix(string(b), "TERM\n") {
		t.Errorf("the command's TERM trap did not run (%q, %v): it was not sent SIGTERM first", b, err)
	}
	if !fileExists(alive) {
		t.Errorf("the command did not run on after its TERM trap: it was killed without a grace period")
	}
	if elapsed < killDelay {
		t.Errorf("derive returned %v after the cancel, before the grace period of %v", elapsed, killDelay)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the command (pid %d) is still there after derive returned: kill(0) = %v", pid, err)
	}
	f.checkWorkRemoved(t)
}

// cancelWhenStarted calls cancel once the file started exists, or after
// 30 s, so that a command that never starts fails the test rather than
// hangs it.
func cancelWhenStarted(started string, cancel func()) {
	for deadline := time.Now().Add(30 * time.Second); !fileExists(started) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
