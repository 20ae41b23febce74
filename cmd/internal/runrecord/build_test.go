package runrecord

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/buildinfo"
)

// TestStartAndResumeRecordTheBuild checks that run_start and resume name
// the pinfs build that wrote them (issue 24 item 10), that Mounts carries
// it, and that a record written before, without it, still reads.
func TestStartAndResumeRecordTheBuild(t *testing.T) {
	p := filepath.Join(t.TempDir(), "runs.jsonl")
	for range 2 {
		r, err := openLocalRecord(t, p, "run-1", digestA)
		if err != nil {
			t.Fatal(err)
		}
		closeOK(t, r)
	}
	want := buildinfo.Get()
	if want.Version == "" {
		t.Fatal("buildinfo.Get() has no version")
	}
	es := readEvents(t, p)
	if got := kinds(es); got != "run_start,resume" {
		t.Fatalf("events %s", got)
	}
	for _, e := range es {
		if e.Pinfs == nil || *e.Pinfs != want {
			t.Errorf("%s: pinfs %+v, want %+v", e.Event, e.Pinfs, want)
		}
	}
	run, err := ReadRun(t.Context(), Source{URL: p}, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range run.Mounts(time.Now(), nil) {
		if m.Pinfs == nil || *m.Pinfs != want {
			t.Errorf("mount %s/%d: pinfs %+v, want %+v", m.Host, m.PID, m.Pinfs, want)
		}
	}

	// A record of before issue 24 names no build: it reads, with none.
	old := filepath.Join(t.TempDir(), "old.jsonl")
	line := `{"time":"2026-11-30T10:00:00Z","run_id":"old-1","digest":"` + string(digestA) + `","event":"run_start","seq":1,"host":"h1","pid":7,"store":"s3://data/x"}` + "\n"
	if err := os.WriteFile(old, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	run, err = ReadRun(t.Context(), Source{URL: old}, "old-1")
	if err != nil {
		t.Fatal(err)
	}
	ms := run.Mounts(time.Now(), nil)
	if len(ms) != 1 || ms[0].Pinfs != nil || ms[0].Store != "s3://data/x" {
		t.Fatalf("old record's mounts %+v, want one with no build", ms)
	}
}
