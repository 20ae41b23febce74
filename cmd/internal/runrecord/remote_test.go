package runrecord

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

const s3URL = "s3://records/pinfs"

// remoteOptions returns Options for run id at the fake, with a spool in
// spoolDir and a short retry delay.
func remoteOptions(f *fakeBlobs, spoolDir, runID string, d verify.Digest) Options {
	return Options{URL: s3URL, RunID: runID, Digest: d, SpoolDir: spoolDir, Open: f.open, Retry: 5 * time.Millisecond}
}

func spoolFile(dir, runID string) string { return filepath.Join(dir, runID+".jsonl") }

// spooled returns the events in run id's spool (none if it is absent).
func spooled(t testing.TB, dir, runID string) []Event {
	t.Helper()
	data, err := os.ReadFile(spoolFile(dir, runID))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return parseLines(t, data)
}

// pending returns how many events r's spool holds, as r sees it.
func pending(r *Record) int64 { return r.sink.(*remoteSink).spool.pending.Load() }

// waitFor polls cond for up to ten seconds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

var eventKeyRE = regexp.MustCompile(`^runs/run-s/events/\d{8}T\d{6}\.\d{9}Z-\d{6}-[a-z_]+-[0-9a-f]{8}\.json$`)

func TestRemoteBindOnceResumeRefuse(t *testing.T) {
	f, spool := newFake(), t.TempDir()
	r, err := Open(t.Context(), remoteOptions(f, spool, "run-s", digestA))
	if err != nil {
		t.Fatal(err)
	}
	if r.Resumed() {
		t.Fatal("first Open resumed")
	}
	closeOK(t, r)
	bind := f.object("runs/run-s/run.json")
	if !strings.Contains(string(bind), string(digestA)) {
		t.Fatalf("binding object %q", bind)
	}

	r, err = Open(t.Context(), remoteOptions(f, spool, "run-s", digestA))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Resumed() {
		t.Fatal("second Open did not resume")
	}
	closeOK(t, r)
	if got := f.object("runs/run-s/run.json"); string(got) != string(bind) {
		t.Fatalf("binding rewritten: %q, was %q", got, bind)
	}

	puts := len(f.putOrder())
	_, err = Open(t.Context(), remoteOptions(f, spool, "run-s", digestB))
	if !errors.Is(err, ErrDigestChanged) || !strings.Contains(err.Error(), string(digestA)) || !strings.Contains(err.Error(), string(digestB)) {
		t.Fatalf("Open with another digest: %v, want ErrDigestChanged naming both digests", err)
	}
	if len(f.putOrder()) != puts || len(spooled(t, spool, "run-s")) != 0 {
		t.Fatal("a refused Open wrote something")
	}

	es := f.events(t, "run-s")
	if kinds(es) != "run_start,resume" {
		t.Fatalf("events %s", kinds(es))
	}
	for _, k := range f.putOrder() {
		if k != "runs/run-s/run.json" && !eventKeyRE.MatchString(k) {
			t.Errorf("event key %q", k)
		}
	}
}

// TestRemoteSpoolThenBackgroundDelivery: while the store is unreachable
// Emit still returns nil, with the event in the spool; once the store is
// back the background delivery sends it and empties the spool.
func TestRemoteSpoolThenBackgroundDelivery(t *testing.T) {
	f, spool := newFake(), t.TempDir()
	r, err := Open(t.Context(), remoteOptions(f, spool, "run-s", digestA))
	if err != nil {
		t.Fatal(err)
	}
	f.setDown(true)
	for i := range 3 {
		e := Event{Event: Mismatch, Path: fmt.Sprintf("m%d", i), Range: &Range{Off: int64(i) << 20, Len: 1 << 20}, From: FromDisk}
		if err := r.Emit(t.Context(), e); err != nil {
			t.Fatalf("Emit while unreachable: %v", err)
		}
		// Durable before Emit returns: the line is in the spool already.
		sp := spooled(t, spool, "run-s")
		if len(sp) != i+1 || sp[i].Path != e.Path {
			t.Fatalf("after Emit %d the spool holds %+v", i, sp)
		}
	}
	time.Sleep(30 * time.Millisecond) // a few failed deliveries
	f.setDown(false)
	waitFor(t, "the spool to be delivered", func() bool {
		_, err := os.Stat(spoolFile(spool, "run-s"))
		return errors.Is(err, os.ErrNotExist) && pending(r) == 0
	})
	if es := f.events(t, "run-s"); kinds(es) != "run_start,mismatch,mismatch,mismatch" || es[3].Path != "m2" || es[3].From != FromDisk {
		t.Fatalf("store holds %s", kinds(es))
	}
	// With the spool empty, events go straight to the store again.
	if err := r.Emit(t.Context(), Event{Event: RunEnd, Totals: &Totals{Mismatches: 3}}); err != nil {
		t.Fatal(err)
	}
	if len(spooled(t, spool, "run-s")) != 0 || len(f.events(t, "run-s")) != 5 {
		t.Fatal("run_end was not put directly")
	}
	closeOK(t, r)
}

// TestRemoteCloseLeavesSpoolForNextOpen: Close cannot deliver to a store
// that is still down, so the events stay in the spool, and the next Open
// delivers them before its own resume event.
func TestRemoteCloseLeavesSpoolForNextOpen(t *testing.T) {
	f, spool := newFake(), t.TempDir()
	r, err := Open(t.Context(), remoteOptions(f, spool, "run-s", digestA))
	if err != nil {
		t.Fatal(err)
	}
	f.setDown(true)
	for _, k := range []string{VersionMissing, FetchFailed, RunEnd} {
		if err := r.Emit(t.Context(), Event{Event: k, Path: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	err = r.Close(t.Context())
	if !errors.Is(err, ErrSpooled) || !strings.Contains(err.Error(), "3 events") {
		t.Fatalf("Close while unreachable: %v, want ErrSpooled for 3 events", err)
	}
	if sp := spooled(t, spool, "run-s"); kinds(sp) != "version_missing,fetch_failed,run_end" {
		t.Fatalf("spool after Close: %s", kinds(sp))
	}

	f.setDown(false)
	r, err = Open(t.Context(), remoteOptions(f, spool, "run-s", digestA))
	if err != nil {
		t.Fatal(err)
	}
	if len(spooled(t, spool, "run-s")) != 0 {
		t.Fatal("Open left the spool undelivered")
	}
	puts := f.putOrder()
	want := []string{"run_start", "version_missing", "fetch_failed", "run_end", "resume"}
	if len(puts) != 1+len(want) {
		t.Fatalf("puts %v", puts)
	}
	for i, k := range want {
		if !strings.Contains(puts[1+i], "-"+k+"-") {
			t.Fatalf("put %d is %s, want a %s event (leftovers before resume)", i, puts[1+i], k)
		}
	}
	closeOK(t, r)
}

// TestRemoteRedeliveryIsIdempotent: a Put whose answer is lost is spooled
// and sent again under the same key with the same bytes; and a spool that
// a crash left after delivery is delivered again harmlessly.
func TestRemoteRedeliveryIsIdempotent(t *testing.T) {
	f, spool := newFake(), t.TempDir()
	r, err := Open(t.Context(), remoteOptions(f, spool, "run-s", digestA))
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.lostAck = true
	f.mu.Unlock()
	if err := r.Emit(t.Context(), Event{Event: Mismatch, Path: "x", From: FromNetwork}); err != nil {
		t.Fatal(err)
	}
	sp := spooled(t, spool, "run-s")
	lostLine, _ := os.ReadFile(spoolFile(spool, "run-s"))
	if len(sp) != 1 || f.object(eventKey(&sp[0], lostLine)) == nil {
		t.Fatalf("spool %+v; the lost Put should have stored its bytes too", sp)
	}
	f.mu.Lock()
	f.lostAck = false
	f.mu.Unlock()
	waitFor(t, "redelivery", func() bool { return len(spooled(t, spool, "run-s")) == 0 && pending(r) == 0 })
	closeOK(t, r)
	if string(f.object(eventKey(&sp[0], lostLine))) != string(lostLine) {
		t.Fatal("the object does not hold exactly the spooled line")
	}

	// A crash between the Put and the spool rewrite leaves the line behind.
	n := len(f.events(t, "run-s"))
	if err := os.WriteFile(spoolFile(spool, "run-s"), lostLine, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err = Open(t.Context(), remoteOptions(f, spool, "run-s", digestA))
	if err != nil {
		t.Fatalf("Open with an already delivered spool: %v", err)
	}
	closeOK(t, r)
	if len(spooled(t, spool, "run-s")) != 0 || len(f.events(t, "run-s")) != n+1 { // +1: resume
		t.Fatalf("redelivery: spool %d, events %s", len(spooled(t, spool, "run-s")), kinds(f.events(t, "run-s")))
	}
}

// TestRemoteOpenOffline: a run cannot start while its binding cannot be
// checked; a run this host bound before may resume, spooling until the
// store is back.
func TestRemoteOpenOffline(t *testing.T) {
	f, spool := newFake(), t.TempDir()
	f.setDown(true)
	_, err := Open(t.Context(), remoteOptions(f, spool, "run-s", digestA))
	if err == nil || errors.Is(err, ErrDigestChanged) || !strings.Contains(err.Error(), "cannot check") {
		t.Fatalf("first Open while unreachable: %v", err)
	}
	if len(spooled(t, spool, "run-s")) != 0 {
		t.Fatal("a refused Open spooled an event")
	}

	f.setDown(false)
	r, err := Open(t.Context(), remoteOptions(f, spool, "run-s", digestA))
	if err != nil {
		t.Fatal(err)
	}
	closeOK(t, r)

	f.setDown(true)
	if _, err := Open(t.Context(), remoteOptions(f, spool, "run-s", digestB)); !errors.Is(err, ErrDigestChanged) {
		t.Fatalf("offline Open with another digest: %v, want ErrDigestChanged from the local binding", err)
	}
	r, err = Open(t.Context(), remoteOptions(f, spool, "run-s", digestA))
	if err != nil {
		t.Fatalf("offline resume of a run bound here: %v", err)
	}
	if !r.Resumed() {
		t.Fatal("offline Open did not resume")
	}
	if err := r.Emit(t.Context(), Event{Event: FetchFailed, Path: "p"}); err != nil {
		t.Fatal(err)
	}
	if sp := spooled(t, spool, "run-s"); kinds(sp) != "resume,fetch_failed" {
		t.Fatalf("spool %s", kinds(sp))
	}
	f.setDown(false)
	closeOK(t, r) // the last delivery attempt succeeds
	if es := f.events(t, "run-s"); kinds(es) != "run_start,resume,fetch_failed" {
		t.Fatalf("store holds %s", kinds(es))
	}
}

// TestRemoteOfflineResumeCheckedAtDelivery: if the store's binding turns
// out to name another digest, the offline events are not delivered into
// that run, and Close says why.
func TestRemoteOfflineResumeCheckedAtDelivery(t *testing.T) {
	f, spool := newFake(), t.TempDir()
	r, err := Open(t.Context(), remoteOptions(f, spool, "run-s", digestA))
	if err != nil {
		t.Fatal(err)
	}
	closeOK(t, r)
	f.setDown(true)
	r, err = Open(t.Context(), remoteOptions(f, spool, "run-s", digestA))
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.objs["runs/run-s/run.json"] = []byte(`{"run_id":"run-s","digest":"` + string(digestB) + `"}`)
	f.down = false
	f.mu.Unlock()
	if err := r.Close(t.Context()); !errors.Is(err, ErrDigestChanged) {
		t.Fatalf("Close: %v, want ErrDigestChanged", err)
	}
	if kinds(f.events(t, "run-s")) != "run_start" || kinds(spooled(t, spool, "run-s")) != "resume" {
		t.Fatal("events of the offline resume were delivered into a run bound to another digest")
	}
}

// TestRemoteSpoolOfAnotherURL: leftovers meant for one record URL are not
// delivered to another.
func TestRemoteSpoolOfAnotherURL(t *testing.T) {
	f, spool := newFake(), t.TempDir()
	r, err := Open(t.Context(), remoteOptions(f, spool, "run-s", digestA))
	if err != nil {
		t.Fatal(err)
	}
	f.setDown(true)
	r.Emit(t.Context(), Event{Event: RunEnd})
	if err := r.Close(t.Context()); !errors.Is(err, ErrSpooled) {
		t.Fatal(err)
	}
	f.setDown(false)
	o := remoteOptions(f, spool, "run-s", digestA)
	o.URL = "s3://elsewhere/records"
	if _, err := Open(t.Context(), o); err == nil || !strings.Contains(err.Error(), s3URL) {
		t.Fatalf("Open with another URL over a full spool: %v", err)
	}
}

// TestRemoteConcurrentEmitWhileFlapping: many goroutines emit while the
// store goes up and down; in the end every event is in the store exactly
// once and the spool is empty.
func TestRemoteConcurrentEmitWhileFlapping(t *testing.T) {
	f, spool := newFake(), t.TempDir()
	r, err := Open(t.Context(), remoteOptions(f, spool, "run-s", digestA))
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 6, 30
	stop := make(chan struct{})
	var flapper sync.WaitGroup
	flapper.Go(func() {
		for down := true; ; down = !down {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
				f.setDown(down)
			}
		}
	})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if err := r.Emit(t.Context(), Event{Event: FetchFailed, Path: fmt.Sprintf("g%d/%d", g, i)}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	flapper.Wait()
	f.setDown(false)
	closeOK(t, r)
	es := f.events(t, "run-s")
	var paths []string
	for _, e := range es[1:] {
		paths = append(paths, e.Path)
	}
	slices.Sort(paths)
	if len(es) != 1+goroutines*each || len(slices.Compact(paths)) != goroutines*each {
		t.Fatalf("%d events in the store, want %d distinct", len(es), 1+goroutines*each)
	}
	if len(spooled(t, spool, "run-s")) != 0 {
		t.Fatal("spool not empty")
	}
}

// TestRemoteBindAnswerLost: the Put that creates the binding stores it
// but its answer is lost; reading the binding back shows it is ours, so
// the run starts rather than resumes.
func TestRemoteBindAnswerLost(t *testing.T) {
	f, spool := newFake(), t.TempDir()
	f.lostAck = true
	r, err := Open(t.Context(), remoteOptions(f, spool, "run-s", digestA))
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.lostAck = false
	f.mu.Unlock()
	if r.Resumed() {
		t.Fatal("a first mount whose binding Put lost its answer resumed")
	}
	closeOK(t, r)
	if es := f.events(t, "run-s"); kinds(es) != "run_start" {
		t.Fatalf("store holds %s", kinds(es))
	}
}

// TestRemoteSameTimeEvents: two events with the same time and kind (the
// caller may set Time) still get keys of their own.
func TestRemoteSameTimeEvents(t *testing.T) {
	f, spool := newFake(), t.TempDir()
	r, err := Open(t.Context(), remoteOptions(f, spool, "run-s", digestA))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, p := range []string{"a", "b"} {
		if err := r.Emit(t.Context(), Event{Time: at, Event: Mismatch, Path: p}); err != nil {
			t.Fatal(err)
		}
	}
	closeOK(t, r)
	if es := f.events(t, "run-s"); kinds(es) != "mismatch,mismatch,run_start" {
		t.Fatalf("store holds %s", kinds(es))
	}
}

// TestRemoteBindNeedsExclusiveCreate: a store that cannot create the
// binding exclusively (no store.Creator) is refused, and nothing is
// stored or spooled.
func TestRemoteBindNeedsExclusiveCreate(t *testing.T) {
	f, spool := newFake(), t.TempDir()
	o := remoteOptions(f, spool, "run-s", digestA)
	o.Open = func(ctx context.Context, url string) (store.Blobs, error) {
		b, err := f.open(ctx, url)
		return struct{ store.Blobs }{b}, err // Get and Put only
	}
	r, err := Open(t.Context(), o)
	if err == nil {
		r.Close(t.Context())
		t.Fatal("Open bound a run on a store without an exclusive create")
	}
	if !errors.Is(err, store.ErrNotExclusive) || !strings.Contains(err.Error(), "refusing to bind run run-s") {
		t.Fatalf("Open = %v; want a refusal wrapping store.ErrNotExclusive", err)
	}
	if keys := f.putOrder(); len(keys) > 0 {
		t.Fatalf("a refused bind stored %v", keys)
	}
	if es := spooled(t, spool, "run-s"); len(es) > 0 {
		t.Fatalf("a refused bind spooled %s", kinds(es))
	}
}
