package runrecord

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
)

// listingFake is the fake store with the key listing of the real
// backends (store.KeyLister), counting GETs by key.
type listingFake struct {
	*fakeBlobs
	mu   sync.Mutex
	gets []string
}

func newListingFake() *listingFake { return &listingFake{fakeBlobs: newFake()} }

func (l *listingFake) open(ctx context.Context, url string) (store.Blobs, error) {
	if _, err := l.fakeBlobs.open(ctx, url); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *listingFake) Get(ctx context.Context, key string) ([]byte, error) {
	l.mu.Lock()
	l.gets = append(l.gets, key)
	l.mu.Unlock()
	return l.fakeBlobs.Get(ctx, key)
}

func (l *listingFake) List(ctx context.Context, prefix string) ([]string, error) {
	f := l.fakeBlobs
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, errUnreachable
	}
	var ks []string
	for k := range f.objs {
		if strings.HasPrefix(k, prefix) {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks, nil
}

// takeGets returns the keys got since the last call, sorted.
func (l *listingFake) takeGets() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.gets
	l.gets = nil
	slices.Sort(g)
	return g
}

// putEvent stores e under its key, as a delivery does.
func (l *listingFake) putEvent(t testing.TB, e Event) {
	t.Helper()
	line := lineOf(t, e)
	if err := l.Put(t.Context(), eventKey(&e, line), line); err != nil {
		t.Fatal(err)
	}
}

// emitAll emits es to r.
func emitAll(t testing.TB, r *Record, es ...Event) {
	t.Helper()
	for _, e := range es {
		if err := r.Emit(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadStore: ReadRun, ReadConsumed and List of a record in a store,
// with the spool of undelivered events merged, each event once.
func TestReadStore(t *testing.T) {
	l, spool := newListingFake(), t.TempDir()
	o := Options{URL: s3URL, RunID: "plain", Digest: digestA, SpoolDir: spool, Open: l.open, Retry: time.Hour}
	r, err := Open(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	emitAll(t, r, Event{Event: Mismatch, Path: "a"}, Event{Event: ConsumedSet, Set: "c1.one"}, Event{Event: RunEnd, Totals: &Totals{MembersOpened: 1}})
	closeOK(t, r)
	if r, err = Open(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	emitAll(t, r, Event{Event: ConsumedSet, Set: "c1.two"})
	l.setDown(true)
	emitAll(t, r, Event{Event: ConsumedSet, Set: "c1.three"}, Event{Event: Mismatch, Path: "b"})
	if err := r.Close(t.Context()); !errors.Is(err, ErrSpooled) {
		t.Fatalf("Close with the store down: %v", err)
	}
	l.setDown(false)
	adm := o
	adm.RunID = "adm"
	if _, _, err := Admit(t.Context(), adm, permitFor(digestA)); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	src := Source{URL: s3URL, SpoolDir: spool, Open: l.open}

	run, err := ReadRun(ctx, src, "plain")
	if err != nil {
		t.Fatal(err)
	}
	const all = "run_start,mismatch,consumed,run_end,resume,consumed,consumed,mismatch"
	if kinds(run.Events) != all || run.Spooled != 2 || run.Torn != 0 || run.Digest != digestA || run.Permit != nil {
		t.Fatalf("events %s, spooled %d torn %d digest %s", kinds(run.Events), run.Spooled, run.Torn, run.Digest)
	}
	if s := run.State(time.Now(), LocalLiveness); s != StateRunning { // this process, no run_end
		t.Fatalf("state %s", s)
	}
	if p := run.Events[4].Proc; p == "" || p != selfIdentity() { // resume names this process
		t.Fatalf("resume records process %q, want this one's %q", p, selfIdentity())
	}
	noSpool := src
	noSpool.SpoolDir = ""
	if run, err := ReadRun(ctx, noSpool, "plain"); err != nil || kinds(run.Events) != "run_start,mismatch,consumed,run_end,resume,consumed" || run.Spooled != 0 {
		t.Fatalf("without the spool: %+v, %v", run, err)
	}

	// A spooled event delivered since (its line in the store too) counts once.
	spooledEvents := spooled(t, spool, "plain")
	l.putEvent(t, spooledEvents[0])
	if run, err = ReadRun(ctx, src, "plain"); err != nil || kinds(run.Events) != all || run.Spooled != 1 {
		t.Fatalf("with a spooled event delivered: %s, spooled %d, %v", kinds(run.Events), run.Spooled, err)
	}

	l.takeGets()
	cs, err := ReadConsumed(ctx, src, "plain")
	if err != nil {
		t.Fatal(err)
	}
	var sets []string
	for _, e := range cs {
		sets = append(sets, e.Set)
	}
	if strings.Join(sets, ",") != "c1.one,c1.two,c1.three" {
		t.Fatalf("consumed sets %v", sets)
	}
	for _, k := range l.takeGets() {
		if !strings.Contains(k, "-consumed-") {
			t.Errorf("ReadConsumed got %s", k)
		}
	}

	if run, err = ReadRun(ctx, src, "adm"); err != nil || run.Permit == nil || run.Permit.Digest != digestA || run.State(time.Now(), nil) != StateAdmitted {
		t.Fatalf("admitted run: %+v, %v", run, err)
	}
	if _, err := ReadRun(ctx, src, "nope"); !errors.Is(err, ErrNoRun) {
		t.Fatalf("a run the store lacks: %v", err)
	}

	first := run0(t, ctx, src).Events[0].Time
	l.takeGets()
	infos, err := List(ctx, src, time.Now(), LocalLiveness)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[0].RunID != "plain" || infos[1].RunID != "adm" {
		t.Fatalf("list %+v", infos)
	}
	if p := infos[0]; p.State != StateRunning || p.Mounts != 2 || p.Integrity[Mismatch] != 2 || p.Digest != digestA ||
		!p.First.Equal(first) {
		t.Fatalf("list entry %+v", p)
	}
	if a := infos[1]; a.State != StateAdmitted || a.Mounts != 0 || a.Digest != digestA || a.First.IsZero() {
		t.Fatalf("admitted entry %+v", a)
	}
	for _, k := range l.takeGets() {
		if n, ok := parseEventKey(k); !strings.HasSuffix(k, "/run.json") && !(ok && (n.event == RunStart || n.event == Resume || n.event == RunEnd)) {
			t.Errorf("List got %s", k)
		}
	}

	if _, err := List(ctx, Source{URL: s3URL, Open: l.fakeBlobs.open}, time.Now(), nil); err == nil ||
		!strings.Contains(err.Error(), "cannot list") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a store that cannot list: %v", err)
	}
}

// run0 is ReadRun of "plain".
func run0(t testing.TB, ctx context.Context, src Source) *Run {
	t.Helper()
	r, err := ReadRun(ctx, src, "plain")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestListStoreWindow: whether a mount on another host still runs hangs
// on its recent events, which List GETs (only those of the last three
// flush intervals).
func TestListStoreWindow(t *testing.T) {
	l := newListingFake()
	now := at(60)
	start := ev("w", RunStart, 0, "elsewhere", 10, 1)
	start.FlushInterval = "1m"
	l.putEvent(t, start)
	oldSet := consumedEv("w", 30, "elsewhere", 10, 2, "c1.old")
	newSet := consumedEv("w", 59, "elsewhere", 10, 3, "c1.new")
	l.putEvent(t, oldSet)
	l.putEvent(t, newSet)
	src := Source{URL: s3URL, Open: l.open}
	for _, c := range []struct {
		now   time.Time
		state string
		got   string // the consumed object GET, if any
	}{{now, StateRunning, "c1.new"}, {at(63), StateCrashed, ""}} {
		l.takeGets()
		infos, err := List(t.Context(), src, c.now, LocalLiveness)
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != 1 || infos[0].State != c.state || infos[0].Digest != digestA || !infos[0].Last.Equal(at(59)) {
			t.Fatalf("at %v: list %+v", c.now, infos)
		}
		var got []string
		for _, k := range l.takeGets() {
			if strings.Contains(k, "-consumed-") {
				got = append(got, string(l.object(k)))
			}
		}
		if c.got == "" && len(got) > 0 || c.got != "" && (len(got) != 1 || !strings.Contains(got[0], c.got)) {
			t.Fatalf("at %v: List got consumed objects %v", c.now, got)
		}
	}
}

// TestReadSpoolOtherRecord: a spool bound to another record URL is not merged.
func TestReadSpoolOtherRecord(t *testing.T) {
	l, spool := newListingFake(), t.TempDir()
	o := Options{URL: s3URL, RunID: "x", Digest: digestA, SpoolDir: spool, Open: l.open, Retry: time.Hour}
	r, err := Open(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	l.setDown(true)
	emitAll(t, r, Event{Event: FetchFailed, Path: "p"})
	r.Close(t.Context())
	l.setDown(false)
	if len(spooled(t, spool, "x")) != 1 {
		t.Fatal("nothing spooled")
	}
	local := t.TempDir() + "/runs.jsonl"
	if err := os.WriteFile(local, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		url  string
		want int
	}{{s3URL + "/", 1}, {"s3://records/other", 0}, {local, 0}} {
		infos, err := List(t.Context(), Source{URL: c.url, SpoolDir: spool, Open: l.open}, time.Now(), nil)
		if err != nil {
			t.Fatal(err)
		}
		n := int64(0)
		for _, in := range infos {
			n += in.Integrity[FetchFailed]
		}
		if n != int64(c.want) {
			t.Errorf("%s: %d spooled fetch_failed events merged, want %d", c.url, n, c.want)
		}
	}
}
