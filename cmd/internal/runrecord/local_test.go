package runrecord

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/verify"
)

func openLocalRecord(t testing.TB, path, runID string, d verify.Digest) (*Record, error) {
	t.Helper()
	return Open(t.Context(), Options{URL: path, RunID: runID, Digest: d})
}

func TestLocalBindResumeRefuse(t *testing.T) {
	p := filepath.Join(t.TempDir(), "records", "runs.jsonl") // parent made by Open
	r, err := openLocalRecord(t, p, "run-1", digestA)
	if err != nil {
		t.Fatal(err)
	}
	if r.RunID() != "run-1" || r.Resumed() {
		t.Fatalf("RunID %q, Resumed %v", r.RunID(), r.Resumed())
	}
	if err := r.Emit(t.Context(), Event{Event: FetchFailed, Path: "a", Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	closeOK(t, r)
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("record file: %v, %v; want mode 0644", fi, err)
	}

	r, err = openLocalRecord(t, p, "run-1", digestA)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Resumed() {
		t.Fatal("second Open with the same digest did not resume")
	}
	closeOK(t, r)

	// Another run in the same file binds on its own.
	r, err = openLocalRecord(t, p, "run-2", digestB)
	if err != nil {
		t.Fatal(err)
	}
	closeOK(t, r)

	before, _ := os.ReadFile(p)
	_, err = openLocalRecord(t, p, "run-1", digestB)
	if !errors.Is(err, ErrDigestChanged) {
		t.Fatalf("Open of run-1 with another digest: %v, want ErrDigestChanged", err)
	}
	for _, want := range []string{"run-1", string(digestA), string(digestB), "new run"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	after, _ := os.ReadFile(p)
	if !bytes.Equal(before, after) {
		t.Fatal("a refused Open changed the record")
	}

	es := parseLines(t, after)
	if got := kinds(es); got != "run_start,fetch_failed,resume,run_start" {
		t.Fatalf("events %s", got)
	}
	for i, e := range es {
		wantRun, wantDigest := "run-1", digestA
		if i == 3 {
			wantRun, wantDigest = "run-2", digestB
		}
		if e.RunID != wantRun || e.Digest != wantDigest {
			t.Errorf("event %d: run %s digest %s", i, e.RunID, e.Digest)
		}
	}
	if es[0].Host == "" || es[0].PID != os.Getpid() || es[2].PID != os.Getpid() {
		t.Errorf("run_start/resume without host and pid: %+v %+v", es[0], es[2])
	}
}

func TestLocalEventFields(t *testing.T) {
	p := filepath.Join(t.TempDir(), "runs.jsonl")
	r, err := openLocalRecord(t, p, "", digestA)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\d{8}T\d{6}Z-[0-9a-f]{8}$`).MatchString(r.RunID()) {
		t.Fatalf("generated run id %q", r.RunID())
	}
	ctx := t.Context()
	mismatch := Event{
		Event: Mismatch, Path: "train/x.bin", MemberID: "x", Source: "s3://src/x.bin", VersionID: "v1",
		Expected: "blake3:" + strings.Repeat("c", 64), Range: &Range{Off: 0, Len: 1 << 20}, From: FromNetwork,
	}
	consumed := Event{Event: ConsumedSet, Members: []Consumed{{Path: "train/x.bin", ID: "x", Digest: "blake3:cc", Size: 9, Bytes: 4, Full: false}}}
	end := Event{Event: RunEnd, Totals: &Totals{MembersOpened: 1, BytesServed: 4, BlocksVerified: 1, DiskHits: 2, Mismatches: 1}}
	mismatch.Time = time.Date(2026, 11, 30, 13, 0, 0, 5, time.FixedZone("CET", 3600)) // stored as UTC
	for _, e := range []Event{mismatch, consumed, end} {
		if err := r.Emit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []string{RunStart, Resume, "", "nonsense"} {
		if err := r.Emit(ctx, Event{Event: bad}); err == nil {
			t.Errorf("Emit of kind %q succeeded", bad)
		}
	}
	closeOK(t, r)
	if err := r.Emit(ctx, end); err == nil {
		t.Error("Emit after Close succeeded")
	}
	if err := r.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}

	data, _ := os.ReadFile(p)
	es := parseLines(t, data)
	if got := kinds(es); got != "run_start,mismatch,consumed,run_end" {
		t.Fatalf("events %s", got)
	}
	host, _ := os.Hostname()
	for i := range es {
		if es[i].RunID != r.RunID() || es[i].Seq != int64(i+1) {
			t.Errorf("event %d: run %q seq %d", i, es[i].RunID, es[i].Seq)
		}
		// Every event names its mount, not only run_start.
		if es[i].Host != host || es[i].PID != os.Getpid() {
			t.Errorf("event %d (%s): host %q pid %d, want %q %d", i, es[i].Event, es[i].Host, es[i].PID, host, os.Getpid())
		}
	}
	m := es[1]
	if m.Range == nil || *m.Range != *mismatch.Range {
		t.Errorf("mismatch range read back as %+v", m.Range)
	}
	if !m.Time.Equal(mismatch.Time) || !bytes.Contains(data, []byte(`"time":"2026-11-30T12:00:00.000000005Z"`)) {
		t.Errorf("mismatch time %v, want %v in UTC", m.Time, mismatch.Time)
	}
	m.Time, m.RunID, m.Digest, m.Seq, m.Range, m.Host, m.PID = mismatch.Time, "", "", 0, mismatch.Range, "", 0
	if !reflect.DeepEqual(m, mismatch) {
		t.Errorf("mismatch read back as %+v", m)
	}
	// A mismatch at offset 0 still says so.
	if !bytes.Contains(data, []byte(`"range":{"off":0,"len":1048576}`)) || !bytes.Contains(data, []byte(`"from":"network"`)) {
		t.Errorf("mismatch line lacks its range or source: %s", data)
	}
	if len(es[2].Members) != 1 || es[2].Members[0] != consumed.Members[0] {
		t.Errorf("consumed read back as %+v", es[2].Members)
	}
	if es[3].Totals == nil || *es[3].Totals != *end.Totals {
		t.Errorf("totals read back as %+v", es[3].Totals)
	}
}

// TestLocalConcurrentEmit has two records on one file (two descriptors,
// like two processes) and many goroutines emitting long events: every
// line must come out whole, and each record's lines in stamp order.
func TestLocalConcurrentEmit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "runs.jsonl")
	var rs []*Record
	for range 2 {
		r, err := openLocalRecord(t, p, "run-c", digestA)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	const goroutines, each = 8, 20
	long := strings.Repeat("x", 70<<10) // larger than a pipe buffer or a page
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			r := rs[g%2]
			for i := range each {
				e := Event{Event: FetchFailed, Path: fmt.Sprintf("g%d/%d", g, i), Error: long}
				if err := r.Emit(t.Context(), e); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, r := range rs {
		closeOK(t, r)
	}
	es := readEvents(t, p)
	if len(es) != 2+goroutines*each {
		t.Fatalf("%d events, want %d", len(es), 2+goroutines*each)
	}
	seen := map[string]bool{}
	var lastSeq [2]int64
	var lastTime [2]time.Time
	for _, e := range es[2:] {
		if e.Error != long || seen[e.Path] {
			t.Fatalf("damaged or repeated event %q", e.Path)
		}
		seen[e.Path] = true
		// Each record's lines are in the order of their stamps, however
		// its goroutines raced.
		var g, i int
		fmt.Sscanf(e.Path, "g%d/%d", &g, &i)
		if r := g % 2; e.Seq <= lastSeq[r] || e.Time.Before(lastTime[r]) {
			t.Fatalf("record %d: event seq %d at %v follows seq %d at %v", r, e.Seq, e.Time, lastSeq[r], lastTime[r])
		} else {
			lastSeq[r], lastTime[r] = e.Seq, e.Time
		}
	}
	if kinds(es[:2]) != "run_start,resume" {
		t.Fatalf("first events %s", kinds(es[:2]))
	}
}

// TestLocalTornLine: a writer that died in the middle of a line must not
// make the next event unreadable.
func TestLocalTornLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "runs.jsonl")
	r, err := openLocalRecord(t, p, "run-t", digestA)
	if err != nil {
		t.Fatal(err)
	}
	closeOK(t, r)
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"time":"2026-11-30T12:00:00Z","run_id":"run-t","digest":"sha256:b`)
	f.Close()

	r, err = openLocalRecord(t, p, "run-t", digestA)
	if err != nil {
		t.Fatalf("Open after a torn line: %v", err)
	}
	if err := r.Emit(t.Context(), Event{Event: RunEnd, Totals: &Totals{}}); err != nil {
		t.Fatal(err)
	}
	closeOK(t, r)
	data, _ := os.ReadFile(p)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), data)
	}
	parseLines(t, []byte(lines[0]+"\n"))
	if es := parseLines(t, []byte(lines[2]+"\n"+lines[3]+"\n")); kinds(es) != "resume,run_end" {
		t.Fatalf("after the torn line: %s", kinds(es))
	}
}

func TestOpenRefusesBadOptions(t *testing.T) {
	dir := t.TempDir()
	for name, o := range map[string]Options{
		"no URL":        {Digest: digestA},
		"bad digest":    {URL: filepath.Join(dir, "r"), Digest: "sha256:abc"},
		"alias":         {URL: filepath.Join(dir, "r"), Digest: "latest"},
		"bad run id":    {URL: filepath.Join(dir, "r"), Digest: digestA, RunID: "../x"},
		"slash run id":  {URL: filepath.Join(dir, "r"), Digest: digestA, RunID: "a/b"},
		"other scheme":  {URL: "gs://b/p", Digest: digestA},
		"s3 sans spool": {URL: "s3://b/p", Digest: digestA, Open: newFake().open},
	} {
		if r, err := Open(t.Context(), o); err == nil {
			r.Close(t.Context())
			t.Errorf("%s: Open succeeded", name)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "r")); !os.IsNotExist(err) {
		t.Errorf("a refused Open created the record: %v", err)
	}
}
