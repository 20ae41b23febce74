package runrecord

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/verify"
)

var (
	digestA = verify.Digest("sha256:" + strings.Repeat("a", 64))
	digestB = verify.Digest("sha256:" + strings.Repeat("b", 64))
)

// parseLines parses JSON Lines data strictly: every line must end in a
// newline, decode as an Event and carry the fields every event has.
func parseLines(t testing.TB, data []byte) []Event {
	t.Helper()
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("record does not end in a newline: ...%q", data[max(0, len(data)-80):])
	}
	var es []Event
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		es = append(es, parseEvent(t, line))
	}
	return es
}

// parseEvent decodes one event line and checks the fields every event has.
func parseEvent(t testing.TB, line []byte) Event {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		t.Fatalf("line is not one JSON object: %v: %q", err, line)
	}
	for _, k := range []string{"time", "run_id", "digest", "event", "seq"} {
		if _, ok := raw[k]; !ok {
			t.Fatalf("line has no %q: %s", k, line)
		}
	}
	var ts string
	json.Unmarshal(raw["time"], &ts)
	if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || !strings.HasSuffix(ts, "Z") {
		t.Fatalf("time %q is not UTC RFC 3339: %v", ts, err)
	}
	var e Event
	if err := json.Unmarshal(line, &e); err != nil {
		t.Fatal(err)
	}
	if e.RunID == "" || e.Digest == "" || !known(e.Event) || e.Seq <= 0 {
		t.Fatalf("incomplete event: %s", line)
	}
	return e
}

func readEvents(t testing.TB, path string) []Event {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseLines(t, data)
}

func kinds(es []Event) string {
	var s []string
	for _, e := range es {
		s = append(s, e.Event)
	}
	return strings.Join(s, ",")
}

func closeOK(t testing.TB, r *Record) {
	t.Helper()
	if err := r.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// openTogether opens the run of every o at the same moment, as first
// mounts on several hosts do, closes the records, and returns how many
// started the run (the others resumed it). An Open error fails the test.
func openTogether(t testing.TB, opts ...Options) (starts int) {
	t.Helper()
	recs := make([]*Record, len(opts))
	errs := make([]error, len(opts))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, o := range opts {
		wg.Go(func() {
			<-start
			recs[i], errs[i] = Open(t.Context(), o)
		})
	}
	close(start)
	wg.Wait()
	for i, r := range recs {
		if errs[i] != nil {
			t.Fatalf("%s: Open %d: %v", opts[i].RunID, i, errs[i])
		}
		if !r.Resumed() {
			starts++
		}
		closeOK(t, r)
	}
	return starts
}
