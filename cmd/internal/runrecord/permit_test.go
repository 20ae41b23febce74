package runrecord

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/verify"
)

// backend is a run record under test: a local file or the fake store.
type backend struct {
	name    string
	opts    func(runID string, d verify.Digest) Options // one host: one spool
	written func() string                               // everything stored so far, to see that nothing was
	events  func(t testing.TB, runID string) []Event    // the run's events (a local permit line included)
}

func backends(t *testing.T) []backend {
	p := filepath.Join(t.TempDir(), "runs.jsonl")
	f, spool := newFake(), t.TempDir()
	return []backend{{
		name: "local",
		opts: func(runID string, d verify.Digest) Options { return Options{URL: p, RunID: runID, Digest: d} },
		written: func() string {
			b, _ := os.ReadFile(p)
			return string(b)
		},
		events: func(t testing.TB, runID string) []Event {
			var es []Event
			for _, e := range readEvents(t, p) {
				if e.RunID == runID {
					es = append(es, e)
				}
			}
			return es
		},
	}, {
		name: "store",
		opts: func(runID string, d verify.Digest) Options { return remoteOptions(f, spool, runID, d) },
		written: func() string {
			f.mu.Lock()
			defer f.mu.Unlock()
			return fmt.Sprint(f.puts, len(f.objs))
		},
		events: func(t testing.TB, runID string) []Event { return f.events(t, runID) },
	}}
}

func permitFor(d verify.Digest) Permit {
	return Permit{Digest: d, Purpose: "training", Gate: "support", Generation: 3, TombstoneWatermark: 7, BenchmarkFence: 2,
		Approvals: []string{"sha256:" + strings.Repeat("c", 64)}}
}

func admit(t testing.TB, o Options, p Permit) Permit {
	t.Helper()
	held, created, err := Admit(t.Context(), o, p)
	if err != nil || !created {
		t.Fatalf("Admit: created %v, %v", created, err)
	}
	return held
}

func samePermit(t testing.TB, what string, got *Permit, want Permit) {
	t.Helper()
	if got == nil || !reflect.DeepEqual(*got, want) {
		t.Fatalf("%s: permit %+v, want %+v", what, got, want)
	}
}

func TestAdmitThenOpen(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			held := admit(t, b.opts("run-p", ""), permitFor(digestA))
			if held.RunID != "run-p" || held.Digest != digestA || held.Time.IsZero() || held.Time.Location() != time.UTC {
				t.Fatalf("held permit %+v", held)
			}
			if es := b.events(t, "run-p"); b.name == "local" && kinds(es) != PermitEvent {
				t.Fatalf("after Admit the record holds %s, want the permit alone", kinds(es))
			}
			r, err := Open(t.Context(), b.opts("run-p", digestA))
			if err != nil {
				t.Fatal(err)
			}
			if r.Resumed() {
				t.Fatal("the first mount after Admit resumed")
			}
			samePermit(t, "first Open", r.Permit(), held)
			closeOK(t, r)
			o := b.opts("run-p", digestA)
			o.RequirePermit = true
			r, err = Open(t.Context(), o)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Resumed() {
				t.Fatal("the second mount after Admit did not resume")
			}
			samePermit(t, "resume", r.Permit(), held)
			closeOK(t, r)
			want := "run_start,resume"
			if b.name == "local" {
				want = "permit," + want
			}
			if got := kinds(b.events(t, "run-p")); got != want {
				t.Fatalf("events %s, want %s", got, want)
			}
			// The permitted run is bound to its digest like any other.
			if _, err := Open(t.Context(), b.opts("run-p", digestB)); !errors.Is(err, ErrDigestChanged) {
				t.Fatalf("Open with another digest: %v, want ErrDigestChanged", err)
			}
			// A run opened without a permit has none.
			r, err = Open(t.Context(), b.opts("run-free", digestA))
			if err != nil {
				t.Fatal(err)
			}
			if r.Permit() != nil {
				t.Fatalf("a run never admitted has permit %+v", r.Permit())
			}
			closeOK(t, r)
		})
	}
}

func TestAdmitTwiceReturnsTheHeldPermit(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			first := admit(t, b.opts("run-2x", digestA), permitFor(digestA))
			before := b.written()
			p := permitFor(digestB)
			p.Generation = 4
			held, created, err := Admit(t.Context(), b.opts("run-2x", digestB), p)
			if err != nil || created {
				t.Fatalf("second Admit: created %v, %v; want the held permit", created, err)
			}
			samePermit(t, "second Admit", &held, first)
			if b.written() != before {
				t.Fatal("a second Admit wrote something")
			}
			// Also after the run started.
			r, err := Open(t.Context(), b.opts("run-2x", digestA))
			if err != nil {
				t.Fatal(err)
			}
			closeOK(t, r)
			before = b.written()
			if held, created, err = Admit(t.Context(), b.opts("run-2x", digestA), permitFor(digestA)); err != nil || created {
				t.Fatalf("Admit of a started run: created %v, %v", created, err)
			}
			samePermit(t, "Admit of a started run", &held, first)
			if b.written() != before {
				t.Fatal("Admit of a started run wrote something")
			}
		})
	}
}

func TestAdmitOfARunBoundWithoutPermitFails(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			r, err := Open(t.Context(), b.opts("run-u", digestA))
			if err != nil {
				t.Fatal(err)
			}
			closeOK(t, r)
			before := b.written()
			_, created, err := Admit(t.Context(), b.opts("run-u", digestA), permitFor(digestA))
			if err == nil || created || !strings.Contains(err.Error(), "run run-u was started without a permit") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Admit of a run started unadmitted: created %v, %v", created, err)
			}
			if b.written() != before {
				t.Fatal("a refused Admit wrote something")
			}
		})
	}
}

func TestOpenRequirePermit(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			require := func(runID string, d verify.Digest) (*Record, error) {
				o := b.opts(runID, d)
				o.RequirePermit = true
				return Open(t.Context(), o)
			}
			refused := func(what, runID, want string) {
				t.Helper()
				before := b.written()
				r, err := require(runID, digestA)
				if err == nil {
					r.Close(t.Context())
				}
				if !errors.Is(err, ErrNotPermitted) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("%s: Open: %v, want a refusal saying %q", what, err, want)
				}
				// It names the record it searched (issue 24 item 5).
				if where := "run record " + b.opts(runID, digestA).URL; !strings.Contains(err.Error(), where) {
					t.Fatalf("%s: Open: %v, want it to name %q", what, err, where)
				}
				if b.written() != before {
					t.Fatalf("%s: a refused Open wrote something", what)
				}
			}
			refused("no binding", "run-none", "run run-none holds no permit")

			r, err := Open(t.Context(), b.opts("run-bare", digestA))
			if err != nil {
				t.Fatal(err)
			}
			closeOK(t, r)
			refused("bound without a permit", "run-bare", "run run-bare holds no permit")

			admit(t, b.opts("run-other", digestB), permitFor(digestB))
			refused("permit for another digest", "run-other", fmt.Sprintf("run run-other's permit is for %s not %s", digestB, digestA))

			held := admit(t, b.opts("run-ok", digestA), permitFor(digestA))
			r, err = require("run-ok", digestA)
			if err != nil {
				t.Fatal(err)
			}
			samePermit(t, "Open with RequirePermit", r.Permit(), held)
			closeOK(t, r)

			o := b.opts("", digestA)
			o.RequirePermit = true
			if _, err := Open(t.Context(), o); err == nil || !strings.Contains(err.Error(), "needs a run id") {
				t.Fatalf("RequirePermit without a run id: %v", err)
			}
		})
	}
}

func TestConcurrentAdmitsCreateOnce(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			for round := range 5 {
				runID := fmt.Sprintf("race-%d", round)
				var (
					wg      sync.WaitGroup
					mu      sync.Mutex
					created int
					digests = map[verify.Digest]int{}
				)
				start := make(chan struct{})
				for i := range 8 {
					d := digestA
					if i%2 == 1 {
						d = digestB
					}
					wg.Go(func() {
						<-start
						held, c, err := Admit(t.Context(), b.opts(runID, d), permitFor(d))
						mu.Lock()
						defer mu.Unlock()
						if err != nil {
							t.Errorf("Admit %d: %v", i, err)
							return
						}
						if c {
							created++
						}
						digests[held.Digest]++
					})
				}
				close(start)
				wg.Wait()
				if created != 1 || len(digests) != 1 {
					t.Fatalf("%s: %d Admits created a permit; held digests %v", runID, created, digests)
				}
			}
		})
	}
}

func TestAdmitGeneratesARunID(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			held := admit(t, b.opts("", ""), permitFor(digestA))
			if checkRunID(held.RunID) != nil || !strings.Contains(held.RunID, "-") {
				t.Fatalf("generated run id %q", held.RunID)
			}
			p := permitFor(digestA)
			p.RunID = "named-in-permit"
			if held = admit(t, b.opts("", ""), p); held.RunID != "named-in-permit" {
				t.Fatalf("run id %q, want the permit's", held.RunID)
			}
			if _, _, err := Admit(t.Context(), b.opts("other", ""), p); err == nil {
				t.Fatal("Admit with a permit of another run id")
			}
			if _, _, err := Admit(t.Context(), b.opts("x", digestB), permitFor(digestA)); err == nil {
				t.Fatal("Admit with a permit for another digest than the options")
			}
		})
	}
}

func TestAdmitNeedsTheStore(t *testing.T) {
	f := newFake()
	f.setDown(true)
	_, created, err := Admit(t.Context(), remoteOptions(f, t.TempDir(), "run-d", digestA), permitFor(digestA))
	if err == nil || created {
		t.Fatalf("Admit with the store down: created %v, %v", created, err)
	}
}

// TestAdmitAnswerLost: the create landed but its answer was lost; Admit
// recognises its own binding.
func TestAdmitAnswerLost(t *testing.T) {
	f := newFake()
	f.lostAck = true
	held, created, err := Admit(t.Context(), remoteOptions(f, t.TempDir(), "run-l", digestA), permitFor(digestA))
	if err != nil || !created || held.Digest != digestA {
		t.Fatalf("Admit whose answer was lost: %+v, created %v, %v", held, created, err)
	}
}

// TestRemoteAdmittedRunConcurrentFirstMounts: two first mounts of an
// admitted run, on two hosts: exactly one starts it.
func TestRemoteAdmittedRunConcurrentFirstMounts(t *testing.T) {
	f := newFake()
	admit(t, remoteOptions(f, t.TempDir(), "run-c", digestA), permitFor(digestA))
	var opts []Options
	for range 4 {
		opts = append(opts, remoteOptions(f, t.TempDir(), "run-c", digestA))
	}
	starts := openTogether(t, opts...)
	if got := kinds(f.events(t, "run-c")); starts != 1 || strings.Count(got, RunStart) != 1 {
		t.Fatalf("%d mounts started the admitted run; events %s", starts, got)
	}
}

// TestRemoteAdmittedRunResumesOffline: the local binding keeps the permit,
// so an admitted run resumes with RequirePermit while the store is down.
func TestRemoteAdmittedRunResumesOffline(t *testing.T) {
	f, spool := newFake(), t.TempDir()
	held := admit(t, remoteOptions(f, spool, "run-o", digestA), permitFor(digestA))
	r, err := Open(t.Context(), remoteOptions(f, spool, "run-o", digestA))
	if err != nil {
		t.Fatal(err)
	}
	closeOK(t, r)
	r, err = Open(t.Context(), remoteOptions(f, spool, "run-bare", digestA))
	if err != nil {
		t.Fatal(err)
	}
	closeOK(t, r)

	f.setDown(true)
	o := remoteOptions(f, spool, "run-o", digestA)
	p, err := Held(t.Context(), o) // what a mount checks against the store first
	if err != nil {
		t.Fatalf("Held offline: %v", err)
	}
	samePermit(t, "Held offline", p, held)
	if _, err := Held(t.Context(), remoteOptions(f, t.TempDir(), "run-o", digestA)); err == nil {
		t.Fatal("Held offline without the spooled binding succeeded")
	}
	o.RequirePermit, o.Permit = true, p
	r, err = Open(t.Context(), o)
	if err != nil {
		t.Fatalf("offline resume of an admitted run: %v", err)
	}
	if !r.Resumed() {
		t.Fatal("offline Open did not resume")
	}
	samePermit(t, "offline resume", r.Permit(), held)
	r.Close(t.Context()) // its resume event stays spooled

	o = remoteOptions(f, spool, "run-bare", digestA)
	o.RequirePermit = true
	if _, err := Open(t.Context(), o); !errors.Is(err, ErrNotPermitted) {
		t.Fatalf("offline Open with RequirePermit of a run without a permit: %v", err)
	}
	f.setDown(false)
	r, err = Open(t.Context(), remoteOptions(f, spool, "run-o", digestA))
	if err != nil {
		t.Fatal(err)
	}
	closeOK(t, r)
	if got := kinds(f.events(t, "run-o")); got != "run_start,resume,resume" {
		t.Fatalf("events %s", got)
	}
}

func TestHeld(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			if p, err := Held(ctx, b.opts("run-h", "")); err != nil || p != nil {
				t.Fatalf("Held of a run never bound: %+v, %v", p, err)
			}
			want := admit(t, b.opts("run-h", digestA), permitFor(digestA))
			p, err := Held(ctx, b.opts("run-h", ""))
			if err != nil {
				t.Fatal(err)
			}
			samePermit(t, "Held of an admitted run", p, want)
			r, err := Open(ctx, b.opts("run-u", digestA))
			if err != nil {
				t.Fatal(err)
			}
			closeOK(t, r)
			if p, err := Held(ctx, b.opts("run-u", "")); err != nil || p != nil {
				t.Fatalf("Held of a run started without a permit: %+v, %v", p, err)
			}
			if _, err := Held(ctx, b.opts("bad id/..", "")); err == nil {
				t.Fatal("Held accepted a bad run id")
			}
		})
	}
}
