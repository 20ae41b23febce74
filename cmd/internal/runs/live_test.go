package runs

import (
	"errors"
	"os"
	"testing"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
)

// TestShowWithLiveMounts: the running mount of this host that answered
// live adds its counters to the totals and its consumed set so far to the
// record's; a mount still running elsewhere says as of when the record
// has it; an answer from a process the record does not show running is
// left out (issue 24 item 4).
func TestShowWithLiveMounts(t *testing.T) {
	tab := testTable(t)
	me, _ := os.Hostname()
	start := event(runrecord.RunStart, 1, me, 11)
	start.FlushInterval = "1m0s"
	elsewhere := event(runrecord.RunStart, 2, "other-host", 11)
	elsewhere.FlushInterval = "30s"
	run := &runrecord.Run{RunID: "r1", Digest: testDigest, Events: []runrecord.Event{
		start, elsewhere,
		consumedEvent(5, me, 11, setOf(read{i: 2, full: true})),
		consumedEvent(6, "other-host", 11, consumed.NewSet()),
	}}
	alive := func(*runrecord.Mount) (bool, bool) { return true, true }
	liveTotals := runrecord.Totals{MembersOpened: 2, BytesServed: 5292, BlocksVerified: 3, NetworkFetches: 3}
	live := []LiveMount{
		{Mountpoint: "/data/x", PID: 11, Time: at(9), Totals: liveTotals, Set: setOf(read{i: 1, full: true}, read{i: 2, full: true})},
		{Mountpoint: "/data/y", PID: 99, Time: at(9), Totals: runrecord.Totals{BytesServed: 1}, Set: setOf(read{i: 3, full: true})},
	}
	s, err := Consumed(run, tab)
	if err != nil {
		t.Fatal(err)
	}
	r := ShowSet(run, tab, s, at(10), alive, true, live)
	if r.State != runrecord.StateRunning || len(r.Mounts) != 2 {
		t.Fatalf("report %+v", r)
	}
	if r.Totals != liveTotals {
		t.Errorf("totals %+v, want the live mount's %+v", r.Totals, liveTotals)
	}
	if c := r.Consumed; c.MembersOpened != 2 || c.MembersFull != 2 || c.Bytes != 5000 {
		t.Errorf("consumed %+v, want members 1 and 2 (the live set and the record's)", c)
	}
	m := r.Mounts[0]
	if m.Live == nil || m.Live.Mountpoint != "/data/x" || !m.Live.Time.Equal(at(9)) || m.Live.Totals != liveTotals || m.Every != "1m0s" || !m.LastFlush.Equal(at(5)) {
		t.Errorf("this host's mount %+v (live %+v)", m, m.Live)
	}
	if o := r.Mounts[1]; o.Live != nil || o.Every != "30s" || !o.LastFlush.Equal(at(6)) {
		t.Errorf("the other host's mount %+v", o)
	}

	// A live mount whose set could not be read: its counters count, the
	// consumed set is the record's, and the report says why.
	s, _ = Consumed(run, tab)
	live = []LiveMount{{Mountpoint: "/data/x", PID: 11, Time: at(9), Totals: liveTotals, Err: errors.New("its consumed set: boom")}}
	r = ShowSet(run, tab, s, at(10), alive, false, live)
	if r.Totals != liveTotals || r.Consumed.MembersOpened != 1 || r.Mounts[0].Live == nil || r.Mounts[0].Live.Error != "its consumed set: boom" {
		t.Errorf("with an unreadable live set: totals %+v, consumed %+v, live %+v", r.Totals, r.Consumed, r.Mounts[0].Live)
	}

	// Without live answers, the record's: zeros, as of the last flush.
	s, _ = Consumed(run, tab)
	r = ShowSet(run, tab, s, at(10), alive, false, nil)
	if (r.Totals != runrecord.Totals{}) || r.Consumed.MembersOpened != 1 || r.Mounts[0].Live != nil {
		t.Errorf("without live answers: totals %+v, consumed %+v", r.Totals, r.Consumed)
	}
}
