package runs

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
)

// passthroughRun is testRun with members 1 and 3 served by passthrough,
// 3 by both mounts, and run_end counting the opens.
func passthroughRun() *runrecord.Run {
	run := testRun()
	for i := range run.Events {
		e := &run.Events[i]
		switch {
		case e.Event == runrecord.ConsumedSet && e.Seq == 10:
			e.Passthrough = consumed.EncodeMembers(roaring.BitmapOf(3))
		case e.Event == runrecord.ConsumedSet && e.Seq == 40:
			e.Passthrough = consumed.EncodeMembers(roaring.BitmapOf(1, 3))
		case e.Event == runrecord.RunEnd:
			e.Totals.PassthroughOpens = e.Seq / 10 // 2 and 6
		}
	}
	return run
}

// TestShowPassthrough: run show counts the members served by passthrough,
// gives their set, marks them among the members, and sums the opens; a
// run without any reports as before.
func TestShowPassthrough(t *testing.T) {
	tab := testTable(t)
	r, err := Show(passthroughRun(), tab, at(100), dead, true)
	if err != nil {
		t.Fatal(err)
	}
	p := r.Passthrough
	if p == nil || p.Members != 2 || p.Error != "" {
		t.Fatalf("passthrough %+v, want 2 members", p)
	}
	got, err := consumed.NewDecoder(tab).DecodeMembers(p.Set)
	if err != nil || !got.Equals(roaring.BitmapOf(1, 3)) {
		t.Errorf("passthrough set %q decodes as %v (%v), want [1 3]", p.Set, got, err)
	}
	for _, m := range r.Members {
		if want := m.Index == 1 || m.Index == 3; m.Passthrough != want {
			t.Errorf("member %d %s: passthrough %v, want %v", m.Index, m.Path, m.Passthrough, want)
		}
	}
	if r.Totals.PassthroughOpens != 8 {
		t.Errorf("totals: %d passthrough opens, want 8", r.Totals.PassthroughOpens)
	}
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"passthrough":{"members":2,"set":"`) || !strings.Contains(string(b), `"passthrough_opens":8`) {
		t.Errorf("report JSON lacks the passthrough members or opens: %s", b)
	}

	plain, err := Show(testRun(), tab, at(100), dead, true)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(plain)
	if plain.Passthrough != nil || strings.Contains(string(b), "passthrough") {
		t.Errorf("a run without passthrough reports it: %s", b)
	}
}

// TestShowPassthroughBeyondTable: a passthrough set naming a member the
// table lacks is reported as an error, not as members.
func TestShowPassthroughBeyondTable(t *testing.T) {
	tab := testTable(t)
	run := passthroughRun()
	run.Events[5].Passthrough = consumed.EncodeMembers(roaring.BitmapOf(99))
	r, err := Show(run, tab, at(100), dead, true)
	if err != nil {
		t.Fatal(err)
	}
	if p := r.Passthrough; p == nil || p.Members != 0 || !strings.Contains(p.Error, "member 99") {
		t.Fatalf("passthrough %+v, want an error naming member 99", p)
	}
	for _, m := range r.Members {
		if m.Passthrough {
			t.Errorf("member %d marked passthrough from a set that failed", m.Index)
		}
	}
}
