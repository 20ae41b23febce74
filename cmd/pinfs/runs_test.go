package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/buildinfo"
	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/store/dial"
	"github.com/pinfs/pinfs/verify"
)

// recordedRun pins two members into a local store, and writes run r1 to a
// new local run record as a mount of that store would, having read the
// first member in full; it returns the store, the record and the cache dir.
func recordedRun(t *testing.T) (st, record, cache string) {
	t.Helper()
	t.Setenv("PINFS_STORE", "")
	st = t.TempDir()
	d := verify.Digest(pinFiles(t, st, map[string]string{"a": "alpha", "b": "beta"}))
	s, err := dial.Open(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := verify.Load(t.Context(), s, d)
	if err != nil {
		t.Fatal(err)
	}
	tr := consumed.NewTracker(snap.Table())
	tr.Opened(0)
	tr.Read(0, 0, snap.Table().Size(0))
	cache = filepath.Join(t.TempDir(), "cache")
	record = filepath.Join(t.TempDir(), "runs.jsonl")
	rec, err := runrecord.Open(t.Context(), runrecord.Options{URL: record, RunID: "r1", Digest: d, Store: s.String(), FlushInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []runrecord.Event{
		{Event: runrecord.ConsumedSet, Set: tr.Delta().Encode()},
		{Event: runrecord.RunEnd, Totals: &runrecord.Totals{MembersOpened: 1, BytesServed: 5}},
	} {
		if err := rec.Emit(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st, record, cache
}

// TestRunReplayFallsBackToTheRecordedStore: pinfs run replay without
// --store reads the store the run's mount recorded, as run show does
// (issue 24 item 8).
func TestRunReplayFallsBackToTheRecordedStore(t *testing.T) {
	st, record, cache := recordedRun(t)
	code, out, errs := runPinfs(t, "run", "replay", "r1", "--run-record", record, "--cache-dir", cache, "--quiet")
	if code != exitOK || out != "run r1: 1 members, 5 bytes reproduced byte for byte\n" {
		t.Fatalf("replay without --store: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// --store still wins: an empty store has no such snapshot. (With the
	// first cache dir the table would load from its verified copy, which
	// is the snapshot's whatever the store, and only the members' reads
	// would fail.)
	code, _, errs = runPinfs(t, "run", "replay", "r1", "--run-record", record, "--cache-dir", filepath.Join(t.TempDir(), "cache"), "--quiet", "--store", t.TempDir())
	if code != exitFailed || !strings.Contains(errs, "the member table of") {
		t.Fatalf("replay with another --store: exit %d, stderr %q (store %s)", code, errs, st)
	}
}

// TestRunShowNamesTheBuild: run show prints the pinfs build each mount's
// run_start recorded (issue 24 item 10).
func TestRunShowNamesTheBuild(t *testing.T) {
	_, record, cache := recordedRun(t)
	code, out, errs := runPinfs(t, "run", "show", "r1", "--run-record", record, "--cache-dir", cache)
	want := "  pinfs " + buildinfo.Get().String() + "\n"
	if code != exitOK || !strings.Contains(out, want) {
		t.Fatalf("run show: exit %d, stderr %q, stdout\n%s\nwant a mount line ending %q", code, errs, out, want)
	}
}

// TestRunShowSaysAsOfTheLastFlush: of a mount still running that did not
// answer live (here: this test process, which serves no mount), run show
// says as of which flush the record has it, with the real interval (issue
// 24 item 4).
func TestRunShowSaysAsOfTheLastFlush(t *testing.T) {
	st := t.TempDir()
	d := verify.Digest(pinFiles(t, st, map[string]string{"a": "alpha"}))
	record := filepath.Join(t.TempDir(), "runs.jsonl")
	rec, err := runrecord.Open(t.Context(), runrecord.Options{URL: record, RunID: "r2", Digest: d, Store: st, FlushInterval: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(t.Context())
	flushed := time.Now().Add(2 * time.Second).UTC().Truncate(time.Second) // after run_start, to the second

	if err := rec.Emit(t.Context(), runrecord.Event{Time: flushed, Event: runrecord.ConsumedSet, Set: consumed.NewSet().Encode()}); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runPinfs(t, "run", "show", "r2", "--run-record", record, "--cache-dir", filepath.Join(t.TempDir(), "c"))
	want := "    as of the last flush at " + flushed.Format(time.RFC3339) + " (every 1m30s)\n"
	if code != exitOK || !strings.Contains(out, want) || !strings.Contains(out, "without the counters of 1 running mount(s) not asked live") {
		t.Fatalf("run show: exit %d, stderr %q, stdout\n%s\nwant %q", code, errs, out, want)
	}
	for d, want := range map[time.Duration]string{time.Minute: "1m", time.Hour: "1h", 90 * time.Minute: "1h30m", 45 * time.Second: "45s", 61 * time.Second: "1m1s"} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestRunShowSaysPassthrough: run show says how many members the kernel
// served by passthrough (issue 25 item 4), and nothing of it for a run
// without any.
func TestRunShowSaysPassthrough(t *testing.T) {
	st := t.TempDir()
	d := verify.Digest(pinFiles(t, st, map[string]string{"a": "alpha", "b": "beta"}))
	record := filepath.Join(t.TempDir(), "runs.jsonl")
	rec, err := runrecord.Open(t.Context(), runrecord.Options{URL: record, RunID: "r3", Digest: d, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(t.Context())
	full := consumed.NewSet()
	full.Opened.Add(1)
	full.Full.Add(1)
	e := runrecord.Event{Event: runrecord.ConsumedSet, Set: full.Encode(), Passthrough: consumed.EncodeMembers(full.Full)}
	if err := rec.Emit(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "c")
	code, out, errs := runPinfs(t, "run", "show", "r3", "--run-record", record, "--cache-dir", cache)
	if want := "passthrough  1 members served by the kernel from the disk cache"; code != exitOK || !strings.Contains(out, want) {
		t.Fatalf("run show: exit %d, stderr %q, stdout\n%s\nwant %q", code, errs, out, want)
	}
	code, out, _ = runPinfs(t, "run", "show", "r3", "--run-record", record, "--cache-dir", cache, "--json", "--members")
	var r struct {
		Passthrough struct{ Members int }
		Members     []struct {
			Path        string
			Passthrough bool
		}
	}
	if err := json.Unmarshal([]byte(out), &r); code != exitOK || err != nil || r.Passthrough.Members != 1 ||
		len(r.Members) != 1 || r.Members[0].Path != "b" || !r.Members[0].Passthrough {
		t.Fatalf("run show --json --members: exit %d, %v\n%s\nwant member b served by passthrough", code, err, out)
	}

	_, record, cache = recordedRun(t)
	if _, out, _ := runPinfs(t, "run", "show", "r1", "--run-record", record, "--cache-dir", cache); strings.Contains(out, "passthrough") {
		t.Errorf("run show of a run without passthrough mentions it:\n%s", out)
	}
}
