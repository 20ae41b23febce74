package runrecord

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// lineOf is e's record line.
func lineOf(t testing.TB, e Event) []byte {
	t.Helper()
	line, err := e.line()
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// writeLines writes a record file of the lines of es, and extra bytes after.
func writeLines(t testing.TB, p string, extra string, es ...Event) {
	t.Helper()
	var b []byte
	for _, e := range es {
		b = append(b, lineOf(t, e)...)
	}
	if err := os.WriteFile(p, append(b, extra...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// consumedEv is a consumed event carrying set text s.
func consumedEv(r string, m float64, host string, pid int, seq int64, s string) Event {
	e := ev(r, ConsumedSet, m, host, pid, seq)
	e.Set = s
	return e
}

// threeRuns is a record of three runs, interleaved and out of time order:
// "done" (a mount and a resume, both ended, a mismatch, a duplicated line),
// "dead" (this host, a dead pid, no run_end) and "live" (this process).
func threeRuns(t testing.TB, host string, dead int) []Event {
	t.Helper()
	me := os.Getpid()
	start := ev("done", RunStart, 0, "h9", 5, 1)
	start.FlushInterval, start.Store = "1m", "s3://data/a"
	end := ev("done", RunEnd, 3, "h9", 5, 4)
	end.Totals = &Totals{MembersOpened: 2}
	mm := ev("done", Mismatch, 1, "h9", 5, 2)
	mm.Path = "train/a.bin"
	live := ev("live", RunStart, 1.5, host, me, 1)
	live.Proc = selfIdentity() // as Open writes it: at(1.5) is long before this process started
	return []Event{
		start,
		ev("dead", RunStart, 0.5, host, dead, 1),
		mm,
		consumedEv("done", 2, "h9", 5, 3, "c1.first"),
		live,
		consumedEv("dead", 2.5, host, dead, 2, "c1.dead"),
		end,
		ev("done", Resume, 10, "h9", 6, 1),
		consumedEv("done", 11, "h9", 6, 2, "c1.second"),
		ev("done", FetchFailed, 10.5, "h9", 6, 3),       // written late
		consumedEv("done", 11, "h9", 6, 2, "c1.second"), // the same line twice
		ev("done", RunEnd, 12, "h9", 6, 4),
		mm, // a line written twice counts once
	}
}

func TestReadRunLocal(t *testing.T) {
	host, _ := os.Hostname()
	dead := deadPID(t)
	p := filepath.Join(t.TempDir(), "runs.jsonl")
	torn := string(lineOf(t, consumedEv("done", 13, "h9", 7, 1, strings.Repeat("x", 100))))
	writeLines(t, p, torn[:len(torn)/2], threeRuns(t, host, dead)...)
	src := Source{URL: p}
	ctx := t.Context()

	r, err := ReadRun(ctx, src, "done")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := kinds(r.Events), "run_start,mismatch,consumed,run_end,resume,fetch_failed,consumed,run_end"; got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
	if r.RunID != "done" || r.Digest != digestA || r.Permit != nil || r.Torn != 1 || r.Spooled != 0 {
		t.Fatalf("run %s digest %s permit %v torn %d spooled %d", r.RunID, r.Digest, r.Permit, r.Torn, r.Spooled)
	}
	if r.Events[2].Set != "c1.first" || r.Events[1].Path != "train/a.bin" {
		t.Fatalf("payloads read back as %q, %q", r.Events[2].Set, r.Events[1].Path)
	}
	ms := r.Mounts(at(20), LocalLiveness)
	if len(ms) != 2 || ms[0].Totals == nil || ms[0].Totals.MembersOpened != 2 || !ms[1].Resumed || ms[0].Store != "s3://data/a" {
		t.Fatalf("mounts %+v", ms)
	}
	if s := r.State(at(20), LocalLiveness); s != StateEnded {
		t.Fatalf("state %s", s)
	}

	cs, err := ReadConsumed(ctx, src, "done")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Set != "c1.first" || cs[1].Set != "c1.second" {
		t.Fatalf("consumed events %+v", cs)
	}

	now := at(3) // the dead and the live mount wrote within 3 flush intervals (old default)
	for id, want := range map[string]string{"dead": StateCrashed, "live": StateRunning} {
		r, err := ReadRun(ctx, src, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Torn != 0 {
			t.Errorf("%s: %d torn lines; the torn line is another run's", id, r.Torn)
		}
		if s := r.State(now, LocalLiveness); s != want {
			t.Errorf("%s: state %s, want %s", id, s, want)
		}
	}

	for _, read := range []func() error{
		func() error { _, err := ReadRun(ctx, src, "nope"); return err },
		func() error { _, err := ReadConsumed(ctx, src, "nope"); return err },
	} {
		if err := read(); !errors.Is(err, ErrNoRun) || strings.Contains(err.Error(), "\n") {
			t.Errorf("a run the record lacks: %v", err)
		}
	}
	if _, err := ReadRun(ctx, Source{URL: filepath.Join(t.TempDir(), "none.jsonl")}, "done"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing record: %v", err)
	}

	infos, err := List(ctx, src, now, LocalLiveness)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range infos {
		got = append(got, in.RunID+":"+in.State)
	}
	if strings.Join(got, " ") != "done:ended dead:crashed live:running" {
		t.Fatalf("list %v", got)
	}
	done := infos[0]
	if done.Mounts != 2 || !done.First.Equal(at(0)) || !done.Last.Equal(at(12)) || done.Digest != digestA ||
		done.Integrity[Mismatch] != 1 || done.Integrity[FetchFailed] != 1 || done.Integrity[VersionMissing] != 0 || len(done.Integrity) != 3 {
		t.Fatalf("list entry %+v", done)
	}
	if len(infos[1].Integrity) != 3 {
		t.Fatalf("integrity counts without every kind: %v", infos[1].Integrity)
	}
}

// TestReadOldRecord: a record written before issue 9 (host and pid only
// on run_start and resume, cumulative members lists, no flush interval)
// still reads, and List cuts its lines before the members list.
func TestReadOldRecord(t *testing.T) {
	p := filepath.Join(t.TempDir(), "runs.jsonl")
	old := `{"time":"2026-12-01T10:00:00Z","run_id":"old","digest":"` + string(digestA) + `","event":"run_start","seq":1,"host":"h2","pid":10}
{"time":"2026-12-01T10:05:00Z","run_id":"old","digest":"` + string(digestA) + `","event":"consumed","seq":2,"members":[{"path":"a","id":"1","digest":"blake3:00","size":10,"bytes":10,"full":true}]}
{"time":"2026-12-01T10:06:00Z","run_id":"old","digest":"` + string(digestA) + `","event":"run_end","seq":3,"totals":{"members_opened":1,"bytes_served":10,"blocks_verified":1,"mem_hits":0,"disk_hits":0,"network_fetches":1,"mismatches":0,"version_missing":0,"fetch_failed":0}}
{"time":"2026-12-01T11:00:00Z","run_id":"old","digest":"` + string(digestA) + `","event":"resume","seq":1,"host":"h2","pid":11}
{"time":"2026-12-01T11:01:00Z","run_id":"old","digest":"` + string(digestA) + `","event":"version_missing","seq":2,"path":"b"}
`
	if err := os.WriteFile(p, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	src := Source{URL: p}
	r, err := ReadRun(t.Context(), src, "old")
	if err != nil {
		t.Fatal(err)
	}
	if kinds(r.Events) != "run_start,consumed,run_end,resume,version_missing" || len(r.Events[1].Members) != 1 || !r.Events[1].Members[0].Full {
		t.Fatalf("events %s, members %+v", kinds(r.Events), r.Events[1].Members)
	}
	ms := r.Mounts(at(70), nil)
	if len(ms) != 2 || ms[0].End == nil || ms[0].Totals.BytesServed != 10 || ms[1].End != nil || ms[1].State != StateRunning {
		t.Fatalf("mounts %+v", ms)
	}
	infos, err := List(t.Context(), src, at(80), nil) // 19 minutes silent, more than 3 old intervals
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].State != StateCrashed || infos[0].Mounts != 2 || infos[0].Integrity[VersionMissing] != 1 || !infos[0].Last.Equal(at(61)) {
		t.Fatalf("list %+v", infos)
	}
}

// TestReadAdmitted: a local run's permit is its first line.
func TestReadAdmitted(t *testing.T) {
	p := filepath.Join(t.TempDir(), "runs.jsonl")
	o := Options{URL: p, RunID: "adm", Digest: digestA}
	if _, _, err := Admit(t.Context(), o, permitFor(digestA)); err != nil {
		t.Fatal(err)
	}
	src := Source{URL: p}
	now := time.Now()
	r, err := ReadRun(t.Context(), src, "adm")
	if err != nil {
		t.Fatal(err)
	}
	if r.Permit == nil || r.Permit.Digest != digestA || r.State(now, LocalLiveness) != StateAdmitted {
		t.Fatalf("permit %+v state %s", r.Permit, r.State(now, LocalLiveness))
	}
	infos, err := List(t.Context(), src, now, LocalLiveness)
	if err != nil || len(infos) != 1 || infos[0].State != StateAdmitted || infos[0].Mounts != 0 {
		t.Fatalf("list %+v, %v", infos, err)
	}
	rec, err := Open(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if r, err = ReadRun(t.Context(), src, "adm"); err != nil || r.Permit == nil || r.State(time.Now(), LocalLiveness) != StateRunning {
		t.Fatalf("after Open: %+v, %v", r, err)
	}
	closeOK(t, rec)
}
