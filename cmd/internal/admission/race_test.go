package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/s3test"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/dial"
	"github.com/pinfs/pinfs/store/gate"
	"github.com/pinfs/pinfs/store/storetest"
	"github.com/pinfs/pinfs/verify/sign"
)

const (
	raceRounds  = 12
	raceWriters = 32               // half activate, half advance the tombstone watermark
	roundLimit  = 30 * time.Second // a round whose writers cannot all reach the swap fails
)

// Which side of the race a writer is on, in the context of its calls.
type sideKey struct{}

const (
	sideActivation = "activation"
	sideFence      = "fence"
)

// heldSwaps holds the first n Swaps until all n have been asked for, so
// that the conditional writes of a round's writers race at the store
// itself, and records how each of them ended. When first names a side
// (sideKey in the Swap's context), that side's held Swaps are released
// first and the other side's once all of those have returned, so that
// the side wins; when first is "", all are released together. Later
// Swaps (a fence's retries) pass straight through.
type heldSwaps struct {
	gateStore
	n     int
	first string
	all   chan struct{} // closed when all n have arrived
	ahead chan struct{} // closed when first's held Swaps have all returned

	mu       sync.Mutex
	arrived  int
	returned int     // of first's held Swaps
	results  []error // of the held Swaps
}

func holdSwaps(st gateStore, n int, first string) *heldSwaps {
	return &heldSwaps{gateStore: st, n: n, first: first, all: make(chan struct{}), ahead: make(chan struct{})}
}

func (s *heldSwaps) Swap(ctx context.Context, key string, data []byte, rev string) error {
	side, _ := ctx.Value(sideKey{}).(string)
	s.mu.Lock()
	s.arrived++
	held := s.arrived <= s.n
	if s.arrived == s.n {
		close(s.all)
	}
	s.mu.Unlock()
	if !held {
		return s.gateStore.Swap(ctx, key, data, rev)
	}
	select {
	case <-s.all:
	case <-ctx.Done():
		return fmt.Errorf("waiting for %d writers at the swap: %w", s.n, ctx.Err())
	}
	if s.first != "" && side != s.first {
		select {
		case <-s.ahead:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the %s writers' swaps: %w", s.first, ctx.Err())
		}
	}
	err := s.gateStore.Swap(ctx, key, data, rev)
	s.mu.Lock()
	s.results = append(s.results, err)
	if s.first != "" && side == s.first {
		if s.returned++; s.returned == s.n/2 {
			close(s.ahead)
		}
	}
	s.mu.Unlock()
	return err
}

// raceFenceAndActivation is the issue's "tombstone fence racing an
// activation", on gate "race" in st. Each round, raceWriters writers start
// from the same gate record (generation G, tombstone watermark T): the
// even ones activate that round's candidate, approved and built at T,
// expecting generation G; the odd ones advance the watermark to T+1. All
// of them prepare their change, and their conditional writes are released
// together, or, in two rounds out of three, one side's first (the
// activations' in rounds 0, 3, ..., the fences' in rounds 1, 4, ...), so
// that each side wins some rounds whatever the store's own timing, and
// the test requires both outcomes.
//
// Exactly one of those writes wins. The losing activations never retry:
// each fails with store.ErrConflict saying the gate moved. A fence may
// retry (it is monotonic): if an activation won, one fence commits on top
// of it (the fence follows) and the other fences, retrying, find the
// watermark at T+1 already; if a fence won, the other fences find that at
// once, and the candidate stays APPROVED, never ACTIVE. So every round
// the watermark moves exactly once, and the history holds the winners in
// order, with no gap and no fork.
func raceFenceAndActivation(t *testing.T, st gateStore, alice *sign.Signer, p *sign.Policy) {
	ctx := t.Context()
	const name = "race"
	d0 := approved(t, st, at(0, 0), map[string]string{"round": "start"}, alice)
	chain := []*gate.Record{activate(t, st, Activation{Gate: name, Digest: d0, Expect: 0, Policy: p})}
	activations := 0
	for round := range raceRounds {
		h := chain[len(chain)-1]
		gen, tw := h.Generation, h.TombstoneWatermark
		cand := approved(t, st, at(tw, 0), map[string]string{"round": fmt.Sprint(round)}, alice)

		first := []string{sideActivation, sideFence, ""}[round%3]
		hs := holdSwaps(st, raceWriters, first)
		rctx, cancel := context.WithTimeout(ctx, roundLimit)
		recs := make([]*gate.Record, raceWriters)
		errs := make([]error, raceWriters)
		var wg sync.WaitGroup
		for i := range raceWriters {
			reason := fmt.Sprintf("round %d writer %d", round, i)
			wg.Go(func() {
				if i%2 == 0 {
					wctx := context.WithValue(rctx, sideKey{}, sideActivation)
					recs[i], errs[i] = Activate(wctx, hs, Activation{Gate: name, Digest: cand, Expect: gen, Reason: reason})
				} else {
					wctx := context.WithValue(rctx, sideKey{}, sideFence)
					recs[i], errs[i] = Fence(wctx, hs, FenceChange{Gate: name, Tombstone: tw + 1, Reason: reason})
				}
			})
		}
		wg.Wait()
		cancel()
		what := fmt.Sprintf("round %d (generation %d, watermark %d, first %q)", round, gen, tw, first)
		if len(hs.results) != raceWriters {
			t.Fatalf("%s: %d writers reached the swap; want all %d: %v", what, len(hs.results), raceWriters, errors.Join(errs...))
		}
		storetest.OneWinner(t, what+": the released writes", hs.results)

		var act, fen []int // the writers that committed
		moved := fmt.Sprintf("gate %s moved to generation", name)
		prepared := fmt.Sprintf("while this change was prepared at generation %d", gen)
		already := fmt.Sprintf("gate %s: the tombstone watermark is at %d already; a fence only moves forward (asked %d)", name, tw+1, tw+1)
		for i, err := range errs {
			switch {
			case err == nil && i%2 == 0:
				act = append(act, i)
			case err == nil:
				fen = append(fen, i)
			case i%2 == 0 && (!errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), moved) || !strings.Contains(err.Error(), prepared)):
				t.Fatalf("%s: activation %d: %v; want ErrConflict saying the gate moved since generation %d", what, i, err, gen)
			case i%2 == 1 && err.Error() != already:
				t.Fatalf("%s: fence %d: %v; want %q", what, i, err, already)
			}
		}
		if len(fen) != 1 || len(act) > 1 {
			t.Fatalf("%s: %d activations and %d fences committed; want at most 1 and exactly 1", what, len(act), len(fen))
		}
		switch {
		case first == sideActivation && len(act) != 1:
			t.Fatalf("%s: the activations' writes went first, yet none committed", what)
		case first == sideFence && len(act) != 0:
			t.Fatalf("%s: the fences' writes went first, yet activation %d committed", what, act[0])
		}
		f := recs[fen[0]]
		if f.Op != gate.OpFence || f.TombstoneWatermark != tw+1 {
			t.Fatalf("%s: the fence committed %+v", what, f)
		}
		if len(act) == 1 {
			// The activation won; the fence followed.
			a := recs[act[0]]
			if a.Generation != gen+1 || a.Prev != h.RecordDigest() || a.Digest != cand || a.Op != gate.OpSet || a.TombstoneWatermark != tw {
				t.Fatalf("%s: the activation committed %+v", what, a)
			}
			if f.Generation != gen+2 || f.Prev != a.RecordDigest() || f.Digest != cand {
				t.Fatalf("%s: the fence after the activation committed %+v", what, f)
			}
			if s := state(t, st, cand, p); s != StateActive {
				t.Fatalf("%s: the activated candidate is %s", what, s)
			}
			chain = append(chain, a)
			activations++
		} else {
			// The fence won; the candidate was not activated.
			if f.Generation != gen+1 || f.Prev != h.RecordDigest() || f.Digest != h.Digest {
				t.Fatalf("%s: the winning fence committed %+v", what, f)
			}
			if s := state(t, st, cand, p); s != StateApproved {
				t.Fatalf("%s: the candidate the fence beat is %s; want %s", what, s, StateApproved)
			}
		}
		chain = append(chain, f)
	}
	t.Logf("%d rounds: the activation won %d, the fence %d", raceRounds, activations, raceRounds-activations)
	if activations == 0 || activations == raceRounds {
		t.Fatalf("%d rounds: the activation won %d, the fence %d; want each to win some", raceRounds, activations, raceRounds-activations)
	}

	log := history(t, st, name)
	if len(log) != len(chain) {
		t.Fatalf("the history has %d records; want the %d commits", len(log), len(chain))
	}
	for i, r := range log {
		want := chain[len(chain)-1-i]
		if r.RecordDigest() != want.RecordDigest() {
			t.Fatalf("history[%d] is generation %d %s %s; want generation %d %s %s", i, r.Generation, r.Op, r.Reason, want.Generation, want.Op, want.Reason)
		}
	}
}

// activationThenFence: the activation commits, then the fence follows on
// top of it; a run admitted in between keeps the activated digest.
func activationThenFence(t *testing.T, st gateStore, alice *sign.Signer, p *sign.Policy) {
	const name = "scenario-a"
	rs := newRuns(t)
	old := approved(t, st, at(4, 0), map[string]string{"a": "old"}, alice)
	h := activate(t, st, Activation{Gate: name, Digest: old, Expect: 0, Policy: p})
	cand := approved(t, st, at(4, 0), map[string]string{"a": "new"}, alice)

	a := activate(t, st, Activation{Gate: name, Digest: cand, Expect: h.Generation})
	if permit, _, err := rs.admit(st, name, "run-a", nil); err != nil || permit.Digest != cand {
		t.Fatalf("admit between the activation and the fence: %+v, %v", permit, err)
	}
	f := fence(t, st, FenceChange{Gate: name, Tombstone: 5})
	if a.Generation != 2 || f.Generation != 3 || f.Prev != a.RecordDigest() || f.Digest != cand {
		t.Fatalf("activation %+v then fence %+v", a, f)
	}
	if log := history(t, st, name); len(log) != 3 || log[0].Op != gate.OpFence || log[1].Op != gate.OpSet || log[1].Digest != cand {
		t.Fatalf("history of %d records", len(log))
	}
	if s := state(t, st, cand, p); s != StateActive {
		t.Errorf("the activated digest is %s", s)
	}
	if got, err := rs.mount("run-a", cand); err != nil || got.Digest != cand {
		t.Fatalf("the run admitted before the fence: mount: %+v, %v", got, err)
	}
}

// fenceThenActivation: the fence commits first; the activation prepared
// before it fails, with or without an expected generation, and the
// candidate stays APPROVED; a new manifest at the new watermark
// activates. A run admitted before the fence keeps its digest.
func fenceThenActivation(t *testing.T, st gateStore, alice *sign.Signer, p *sign.Policy) {
	const name = "scenario-b"
	ctx := t.Context()
	rs := newRuns(t)
	old := approved(t, st, at(7, 0), map[string]string{"b": "old"}, alice)
	h := activate(t, st, Activation{Gate: name, Digest: old, Expect: 0, Policy: p})
	cand := approved(t, st, at(7, 0), map[string]string{"b": "candidate"}, alice)
	if permit, _, err := rs.admit(st, name, "run-b", nil); err != nil || permit.Digest != old {
		t.Fatalf("admit before the fence: %+v, %v", permit, err)
	}

	f := fence(t, st, FenceChange{Gate: name, Tombstone: 8})
	_, err := Activate(ctx, st, Activation{Gate: name, Digest: cand, Expect: h.Generation})
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "is at generation 2, not the expected 1") {
		t.Fatalf("activation expecting generation 1 after the fence: %v; want ErrConflict", err)
	}
	for _, expect := range []int64{f.Generation, -1} {
		_, err := Activate(ctx, st, Activation{Gate: name, Digest: cand, Expect: expect})
		if !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), "built at tombstone watermark 7, gate "+name+" is at 8: build a new manifest") {
			t.Fatalf("activation (expect %d) after the fence: %v; want ErrFenced", expect, err)
		}
	}
	unchanged(t, st, name, f, "activations after the fence")
	if s := state(t, st, cand, p); s != StateApproved {
		t.Fatalf("the candidate the fence beat is %s; want %s", s, StateApproved)
	}

	rebuilt := approved(t, st, at(8, 0), map[string]string{"b": "candidate"}, alice)
	if r := activate(t, st, Activation{Gate: name, Digest: rebuilt, Expect: f.Generation}); r.Generation != 3 || r.TombstoneWatermark != 8 {
		t.Fatalf("the manifest at the new watermark: %+v", r)
	}
	if s := state(t, st, rebuilt, p); s != StateActive {
		t.Errorf("the rebuilt manifest is %s", s)
	}

	if got, err := rs.mount("run-b", old); err != nil || got.Digest != old {
		t.Fatalf("the run admitted before the fence: mount %s: %+v, %v", old, got, err)
	}
	if held, created, err := rs.admit(st, name, "run-b", nil); err != nil || created || held.Digest != old {
		t.Fatalf("re-admitting the run after the fence and the new activation: %+v, %v; want its permit for %s", held, err, old)
	}
}

func raceSuite(t *testing.T, st gateStore) {
	kr := newKeyring(t)
	alice := kr.signer("alice")
	p := kr.policy(1, "alice")
	t.Run("race", func(t *testing.T) { raceFenceAndActivation(t, st, alice, p) })
	t.Run("activation-then-fence", func(t *testing.T) { activationThenFence(t, st, alice, p) })
	t.Run("fence-then-activation", func(t *testing.T) { fenceThenActivation(t, st, alice, p) })
}

func TestRaceLocal(t *testing.T) {
	raceSuite(t, newLocal(t))
}

// TestRaceS3 runs the same against versitygw (integration/s3test), whose
// conditional PUTs (v1.8.0) are atomic per key, through a store opened the
// way the pinfs commands open one. With CI=true a missing versitygw fails.
func TestRaceS3(t *testing.T) {
	if testing.Short() {
		t.Skip("real S3 server; not in -short")
	}
	srv := s3test.Start(t)
	srv.UseEnv(t)
	srv.CreateBucket(t, "pins", true)
	st, err := dial.Open(t.Context(), "s3://pins/pinfs")
	if err != nil {
		t.Fatal(err)
	}
	gs, ok := st.(gateStore)
	if !ok {
		t.Fatalf("%T cannot keep gates", st)
	}
	raceSuite(t, gs)
}
