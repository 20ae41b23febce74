package runs

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
)

// dead says every process is known to be gone.
func dead(*runrecord.Mount) (bool, bool) { return false, true }

func TestShowSumsMountsGroupsEventsAndSummarises(t *testing.T) {
	tab := testTable(t)
	run := testRun()
	r, err := Show(run, tab, at(100), dead, false)
	if err != nil {
		t.Fatal(err)
	}
	if r.RunID != "r1" || r.Digest != testDigest || r.State != runrecord.StateEnded || r.Spooled != 1 || r.Torn != 1 {
		t.Fatalf("report %+v", r)
	}
	if len(r.Mounts) != 2 || r.Mounts[0].Host != "h1" || r.Mounts[1].Host != "h2" || !r.Mounts[1].Resumed {
		t.Fatalf("mounts %+v", r.Mounts)
	}
	if want := (runrecord.Totals{MembersOpened: 5, BytesServed: 150, Mismatches: 2, FetchFailed: 1}); r.Totals != want {
		t.Fatalf("totals %+v, want %+v", r.Totals, want)
	}
	var kinds []string
	for _, e := range r.Events {
		kinds = append(kinds, e.Event+" "+e.Path)
	}
	if fmt.Sprint(kinds) != "[mismatch c/w.bin mismatch c/w.bin mismatch a/x.bin fetch_failed a/y.bin]" {
		t.Fatalf("events %v", kinds)
	}
	if e := r.Events[0]; e.Host != "h1" || e.PID != 11 || e.Error == "" || !e.Time.Equal(at(6)) {
		t.Fatalf("event %+v", e)
	}
	for kind, want := range map[string]Group{
		runrecord.Mismatch:       {Count: 3, Members: []string{"a/x.bin", "c/w.bin"}},
		runrecord.FetchFailed:    {Count: 1, Members: []string{"a/y.bin"}},
		runrecord.VersionMissing: {Count: 0, Members: []string{}},
	} {
		g := r.Integrity[kind]
		if g == nil || g.Count != want.Count || !slices.Equal(g.Members, want.Members) || g.Members == nil {
			t.Errorf("%s: %+v, want %+v", kind, g, want)
		}
	}
	c := r.Consumed
	if c.MembersOpened != 4 || c.MembersFull != 2 || c.Bytes != consumed.Granule+(10_000-2*consumed.Granule)+5000 {
		t.Fatalf("consumed %+v", c)
	}
	s, _ := Consumed(run, tab)
	if c.Digest != ConsumedDigest(s, tab) || r.Members != nil {
		t.Fatalf("consumed digest %s, members %v", c.Digest, r.Members)
	}
}

func TestShowListsMembersWithTheirVersions(t *testing.T) {
	tab := testTable(t)
	r, err := Show(testRun(), tab, at(100), dead, true)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range r.Members {
		got = append(got, fmt.Sprint(m.Index, m.Path, m.Version, m.Source, m.Bytes, m.Full, m.Split))
	}
	want := []string{
		fmt.Sprint(0, "a/x.bin", "v-x", "s3://bkt/k/a/x.bin", consumed.Granule+10_000-2*consumed.Granule, false, "train"),
		fmt.Sprint(1, "a/y.bin", "cas:"+tab.Digest(1), "cas:"+tab.Digest(1), 5000, true, ""),
		fmt.Sprint(2, "b/z.bin", "v-z", "s3://bkt/k/b/z.bin", 0, true, "train"),
		fmt.Sprint(3, "c/w.bin", "v-w", "s3://bkt/k/c/w.bin", 0, false, "val"),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("members\n%q\nwant\n%q", got, want)
	}
	if m := r.Members[1]; m.ID != "id-a/y.bin" || m.Digest != tab.Digest(1) || m.Size != 5000 {
		t.Fatalf("member 1: %+v", m)
	}
}

// TestShowJSONHasTheKeysTheIssueNames checks the keys `pinfs run show
// --json` promises, on a run that is still going and has no events yet.
func TestShowJSONHasTheKeysTheIssueNames(t *testing.T) {
	tab := testTable(t)
	for name, run := range map[string]*runrecord.Run{
		"ended":    testRun(),
		"started":  {RunID: "r2", Digest: testDigest, Events: []runrecord.Event{event(runrecord.RunStart, 1, "h", 1)}},
		"admitted": {RunID: "r3", Digest: testDigest, Permit: &runrecord.Permit{RunID: "r3", Digest: testDigest, Purpose: "train"}},
	} {
		r, err := Show(run, tab, at(2), func(*runrecord.Mount) (bool, bool) { return true, true }, false)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(r)
		var doc struct {
			RunID    *string          `json:"run_id"`
			Digest   *string          `json:"digest"`
			State    *string          `json:"state"`
			Mounts   []map[string]any `json:"mounts"`
			Consumed map[string]any   `json:"consumed"`
			Events   []map[string]any `json:"events"`
			Integ    map[string]any   `json:"integrity"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.RunID == nil || doc.Digest == nil || doc.State == nil || doc.Mounts == nil || doc.Events == nil || len(doc.Integ) != 3 {
			t.Fatalf("%s: %s", name, b)
		}
		for _, k := range []string{"members_opened", "members_full", "bytes", "digest"} {
			if _, ok := doc.Consumed[k]; !ok {
				t.Fatalf("%s: consumed lacks %s: %s", name, k, b)
			}
		}
		for _, e := range doc.Events {
			if e["event"] == nil || e["path"] == nil {
				t.Fatalf("%s: event %v", name, e)
			}
		}
	}
}
