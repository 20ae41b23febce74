package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestRunRecordThroughOutage: the run record is in S3 and the store goes
// down while a run is mounted. The fetch that fails, the consumed set and
// run_end stay in the local spool (the daemon still exits 0 and says so);
// once the store is back, the next mount of the same run delivers them,
// byte for byte and in order, before its own resume, and empties the
// spool.
func TestRunRecordThroughOutage(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	const runID = "outage-run"
	cache := filepath.Join(f.work, "cache")
	spool := filepath.Join(cache, "spool", runID+".jsonl")
	// --read-timeout: the read with the store down fails at its end
	// (EIO), and the default (60 s) would be a minute of the suite's time.
	dir, d := f.mount(t, cache, "s3://store/runs", "--run-id", runID, "--read-timeout", "5s")
	if b, err := readFile(t, filepath.Join(dir, "README")); err != nil || !bytes.Equal(b, f.data["README"]) {
		t.Fatalf("README before the outage: %v", err)
	}

	f.s.Stop()
	// mid.bin was never read, so its block must come from the store: EIO.
	if _, err := inMount(t, 3*time.Minute, func() ([]byte, error) {
		return os.ReadFile(filepath.Join(dir, "train", "mid.bin"))
	}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read of an uncached member with the store down: %v; want EIO", err)
	}
	d.stop(t, 3*time.Minute)
	if code := d.exitCode(t, time.Second); code != 0 {
		t.Fatalf("first mount exited %d", code)
	}
	if log, _ := os.ReadFile(d.log); !strings.Contains(string(log), "stay in "+spool) {
		t.Errorf("the daemon log does not say that events stay in the spool:\n%s", log)
	}
	held, err := os.ReadFile(spool)
	if err != nil {
		t.Fatalf("no spool after the outage: %v", err)
	}
	lines := strings.SplitAfter(string(held), "\n") // each event object holds its line, newline included
	lines = lines[:len(lines)-1]                    // after the last newline
	if got := eventKinds(t, lines); !strings.Contains(got, "fetch_failed") || !strings.HasSuffix(got, "consumed,run_end") {
		t.Fatalf("spooled events: %s; want a fetch_failed, then consumed and run_end", got)
	}

	f.s.Restart(t)
	_, d2 := f.mount(t, cache, "s3://store/runs", "--run-id", runID)
	d2.stop(t, time.Minute)
	if code := d2.exitCode(t, time.Second); code != 0 {
		t.Fatalf("second mount exited %d", code)
	}
	if _, err := os.Stat(spool); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the spool is still there after the store came back: %v", err)
	}

	// The store holds every spooled line as its own object, exactly, and
	// in key (time, sequence) order they come before the second mount's
	// resume.
	order := runObjects(t, f, runID)
	at := map[string]int{}
	for i, line := range order {
		at[line] = i
	}
	last := -1
	for _, line := range lines {
		i, ok := at[line]
		if !ok {
			t.Fatalf("spooled event not delivered: %s", line)
		}
		if i <= last {
			t.Fatalf("spooled events stored out of order: %s", eventKinds(t, order))
		}
		last = i
	}
	if got := eventKinds(t, order); !strings.HasPrefix(got, "run_start,") || !strings.Contains(got, "run_end,resume,") {
		t.Fatalf("stored events: %s; want run_start first and the spooled run_end right before resume", got)
	}
}

// runObjects returns the bytes of each event object of run id in the
// record at s3://store/runs, in key order.
func runObjects(t testing.TB, f *fixture, runID string) []string {
	t.Helper()
	c := f.s.Client(t)
	out, err := c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{
		Bucket: aws.String("store"), Prefix: aws.String("runs/runs/" + runID + "/events/"),
	})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	slices.Sort(keys)
	var lines []string
	for _, k := range keys {
		lines = append(lines, string(f.s.Get(t, "store", k, "")))
	}
	return lines
}

// eventKinds returns the event kinds of JSON lines, comma separated.
func eventKinds(t testing.TB, lines []string) string {
	t.Helper()
	var ks []string
	for _, l := range lines {
		var e struct {
			Event string `json:"event"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("event line %q: %v", l, err)
		}
		ks = append(ks, e.Event)
	}
	return strings.Join(ks, ",")
}
