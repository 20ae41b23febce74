package runrecord

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestStoreAndFlushIntervalOnStart: run_start and resume carry the
// mount's store URL and flush interval; other events do not, and every
// event carries host and pid.
func TestStoreAndFlushIntervalOnStart(t *testing.T) {
	p := filepath.Join(t.TempDir(), "runs.jsonl")
	o := Options{URL: p, RunID: "r", Digest: digestA, Store: "s3://data/train", FlushInterval: 90 * time.Second}
	for range 2 {
		r, err := Open(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Emit(t.Context(), Event{Event: ConsumedSet, Set: "c1.x"}); err != nil {
			t.Fatal(err)
		}
		closeOK(t, r)
	}
	es := readEvents(t, p)
	if got := kinds(es); got != "run_start,consumed,resume,consumed" {
		t.Fatalf("events %s", got)
	}
	for _, e := range es {
		opening := e.Event == RunStart || e.Event == Resume
		if opening != (e.Store == o.Store) || opening != (e.FlushInterval == "1m30s") {
			t.Errorf("%s: store %q flush interval %q", e.Event, e.Store, e.FlushInterval)
		}
		if e.Host == "" || e.PID != os.Getpid() {
			t.Errorf("%s: host %q pid %d", e.Event, e.Host, e.PID)
		}
	}
	if es[1].Set != "c1.x" {
		t.Errorf("consumed set read back as %q", es[1].Set)
	}
}

// TestPayloadFieldsLast: Members, Set and Passthrough are the last fields
// of Event, so that List can cut a line before its payload.
func TestPayloadFieldsLast(t *testing.T) {
	ty := reflect.TypeFor[Event]()
	n := ty.NumField()
	if ty.Field(n-1).Name != "Passthrough" || ty.Field(n-2).Name != "Set" || ty.Field(n-3).Name != "Members" {
		t.Fatalf("the last fields of Event are %s, %s, %s; want Members, Set, Passthrough", ty.Field(n-3).Name, ty.Field(n-2).Name, ty.Field(n-1).Name)
	}
	e := Event{Time: time.Date(2026, 12, 1, 9, 0, 0, 5, time.UTC), RunID: "r", Digest: digestA, Event: ConsumedSet, Seq: 1, Host: "h", PID: 1,
		Totals: &Totals{MembersOpened: 3}, Permit: &Permit{Purpose: `,"set":x`}, Members: []Consumed{{Path: "a"}}, Set: "c1.y", Passthrough: "c1.z"}
	line, err := e.line()
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(line, []byte(`,"members":`))
	if i < 0 || bytes.Index(line, []byte(`,"set":`)) < i {
		t.Fatalf("payload not last, or a marker inside a string: %s", line)
	}
	var head Event
	if err := json.Unmarshal(append(line[:i:i], '}'), &head); err != nil {
		t.Fatalf("the line cut before its payload does not decode: %v", err)
	}
	want := e
	want.Members, want.Set, want.Passthrough = nil, "", ""
	if !reflect.DeepEqual(head, want) {
		t.Fatalf("the cut line decodes as %+v, want %+v", head, want)
	}
}
