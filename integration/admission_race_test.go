package integration

// Fences through the pinfs binary, and fences racing activations, on a
// local directory store and on versitygw (helpers in admission_test.go).

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/fusetest"
)

// history returns gate's records, newest first, from pinfs alias log, after
// checking that generations step down by one to 1 and that each record's
// prev is the digest of the record below it (as the text log prints them).
func (a *admStore) history(t testing.TB, gate string) []gateRecord {
	t.Helper()
	var hist []gateRecord
	jsonOf(t, a.env, &hist, "alias", "log", gate, "--store", a.store, "--json")
	var digests, prevs []string
	for _, line := range strings.Split(mustPinfs(t, a.env, "alias", "log", gate, "--store", a.store).stdout, "\n") {
		if f := strings.Fields(line); len(f) > 3 && f[0] == "record" && f[2] == "prev" {
			digests, prevs = append(digests, f[1]), append(prevs, f[3])
		}
	}
	if len(digests) != len(hist) {
		t.Fatalf("alias log %s: %d records in text, %d in JSON", gate, len(digests), len(hist))
	}
	for i, r := range hist {
		if want := int64(len(hist) - i); r.Generation != want {
			t.Fatalf("alias log %s: record %d has generation %d, want %d: %+v", gate, i, r.Generation, want, hist)
		}
		wantPrev := "-"
		if i+1 < len(hist) {
			wantPrev = digests[i+1]
		}
		if prevs[i] != wantPrev || (wantPrev != "-" && r.Prev != wantPrev) {
			t.Fatalf("alias log %s: generation %d's prev is %s (JSON %s), want %s", gate, r.Generation, prevs[i], r.Prev, wantPrev)
		}
	}
	return hist
}

// listFile writes entries, one a line, to a new revocation list file.
func listFile(t testing.TB, entries ...string) string {
	p := filepath.Join(t.TempDir(), "list")
	if err := os.WriteFile(p, []byte("# revoked\n"+strings.Join(entries, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAdmissionFences: a tombstone fence with a revocation list stops new
// admissions and activations of snapshots built before it, while a run
// admitted before keeps its digest; a new snapshot at the new watermark
// goes through; rollbacks never bring back revoked or fenced data; fences
// only move forward; a stale --expect-generation fails; the log holds it all.
func TestAdmissionFences(t *testing.T) {
	t.Parallel()
	fusetest.Require(t)
	s := newSigners(t)
	eachStore(t, func(t *testing.T, a *admStore, data map[string][]byte) {
		st, rec := a.store, a.records[len(a.records)-1]
		const purpose = "fenced-v1"
		admit := func(run string) []string {
			return []string{"admit", "sup", "--purpose", purpose, "--store", st, "--run-record", rec, "--run-id", run}
		}
		d1, _ := a.candidate(t, s, "sup", purpose, 1, 0)
		mustPinfs(t, a.env, "alias", "set", "sup", d1, "--store", st, "--policy", s.policy)
		mustPinfs(t, a.env, admit("run-before")...)
		a.put(t, "train/d.txt", []byte("delta\n"))
		d2, _ := a.candidate(t, s, "sup", purpose, 1, 0) // approved at the old watermark

		r := mustPinfs(t, a.env, "fence", "sup", "--tombstone", "2", "--revoke", listFile(t, "train/b.txt"), "--store", st, "--reason", "leaked")
		if !strings.Contains(r.stdout, "sup generation 2: tombstoneWatermark 2") {
			t.Errorf("fence printed %q", r.stdout)
		}
		refused(t, a.env, 1, []string{"built at tombstone watermark 1, gate sup is at 2"}, admit("run-after")...)
		a.mountPermitted(t, d1, rec, "run-before", "train/b.txt", data["train/b.txt"])
		refused(t, a.env, 1, []string{"built at tombstone watermark 1, gate sup is at 2"}, "alias", "set", "sup", d2, "--store", st)
		if sts := a.status(t, d2, s.policy); sts.State != "APPROVED" || len(sts.Aliases) != 0 {
			t.Errorf("a candidate the fence stopped: %+v, want APPROVED and in no gate", sts)
		}

		// At the new watermark, the revoked member still fails validation.
		d := a.pinAt(t, purpose, 2, 0)
		refused(t, a.env, 1, []string{"train/b.txt"}, "validate", d, "--store", st, "--alias", "sup")
		a.del(t, "train/b.txt")
		d3, _ := a.candidate(t, s, "sup", purpose, 2, 0)
		refused(t, a.env, 1, []string{"generation 2, not the expected 1"}, "alias", "set", "sup", d3, "--store", st, "--expect-generation", "1")
		r = mustPinfs(t, a.env, "alias", "set", "sup", d3, "--store", st, "--expect-generation", "2")
		if !strings.Contains(r.stdout, "sup generation 3 -> "+d3) {
			t.Errorf("alias set after the fence printed %q", r.stdout)
		}
		if got := strings.TrimSpace(mustPinfs(t, a.env, admit("run-after")...).stdout); got != "run-after "+d3 {
			t.Errorf("admit after the new activation printed %q", got)
		}
		refused(t, a.env, 1, []string{"below gate sup's 2", "resurrect"}, "alias", "rollback", "sup", d1, "--store", st)
		for _, n := range []string{"1", "2"} {
			refused(t, a.env, 1, []string{"only moves forward"}, "fence", "sup", "--tombstone", n, "--store", st)
		}

		// A rollback goes back to a snapshot the gate had; after a benchmark
		// fence it never goes back to d4, which holds a fenced member.
		a.put(t, "val/e.txt", []byte("echo\n"))
		d4, _ := a.candidate(t, s, "sup", purpose, 2, 0)
		mustPinfs(t, a.env, "alias", "set", "sup", d4, "--store", st)
		refused(t, a.env, 1, []string{"is at " + d4 + " already"}, "alias", "rollback", "sup", d4, "--store", st)
		refused(t, a.env, 1, []string{"never active"}, "alias", "rollback", "sup", d2, "--store", st)
		r = mustPinfs(t, a.env, "alias", "rollback", "sup", d3, "--store", st, "--reason", "back")
		if !strings.Contains(r.stdout, "sup generation 5 -> "+d3) {
			t.Errorf("alias rollback printed %q", r.stdout)
		}
		mustPinfs(t, a.env, "fence", "sup", "--benchmark", "1", "--revoke", listFile(t, "val/e.txt"), "--store", st)
		refused(t, a.env, 1, []string{"excluded by the gate's fences"}, "alias", "rollback", "sup", d4, "--store", st)

		hist := a.history(t, "sup")
		var ops, ds []string
		for _, r := range hist {
			ops, ds = append(ops, r.Op), append(ds, r.Digest)
		}
		if want := []string{"fence", "rollback", "set", "set", "fence", "set"}; !slices.Equal(ops, want) {
			t.Errorf("alias log ops %v, want %v", ops, want)
		}
		if want := []string{d3, d3, d4, d3, d1, d1}; !slices.Equal(ds, want) {
			t.Errorf("alias log digests %v, want %v", ds, want)
		}
		if top := hist[0]; top.TombstoneWatermark != 2 || top.BenchmarkFence != 1 {
			t.Errorf("gate after the fences: %+v", top)
		}
	})
}

// TestAdmissionRace: each round, 16 `alias set --expect-generation G` of a
// candidate built at the gate's watermark race 16 `fence --tombstone W+1`
// as separate processes. A fence always commits exactly once: when it
// commits first, every activation fails and the candidate stays APPROVED;
// when an activation commits first (at most one can), the fence follows at
// G+2, since a fence retries after a lost race. Every loser exits 1 with a
// one-line reason that says why; the history has no gap and no fork.
//
// So that both outcomes occur whatever the machine's timing, the alias
// sets start first in round 0 and the fences once the gate has moved, the
// fences first in round 1 and the alias sets once the gate has moved, and
// all start together in round 2; the test requires each outcome.
func TestAdmissionRace(t *testing.T) {
	t.Parallel()
	s := newSigners(t)
	const rounds, writers = 3, 32
	eachStore(t, func(t *testing.T, a *admStore, _ map[string][]byte) {
		const purpose = "race-v1"
		d0, _ := a.candidate(t, s, "race", purpose, 1, 0)
		mustPinfs(t, a.env, "alias", "set", "race", d0, "--store", a.store, "--policy", s.policy)
		activations := 0
		for round := range rounds {
			cur := a.show(t, "race")
			a.put(t, fmt.Sprintf("train/round-%d.txt", round), fmt.Appendf(nil, "round %d\n", round))
			c, _ := a.candidate(t, s, "race", purpose, int(cur.TombstoneWatermark), 0)
			set := []string{"alias", "set", "race", c, "--store", a.store, "--expect-generation", fmt.Sprint(cur.Generation)}
			fence := []string{"fence", "race", "--tombstone", fmt.Sprint(cur.TombstoneWatermark + 1), "--store", a.store}

			res := make([]result, writers)
			for i := range res {
				res[i].code = -1 // stays -1 if the run could not start
			}
			var wg sync.WaitGroup
			launch := func(side int) { // 0: the alias sets (even writers), 1: the fences (odd)
				for i := side; i < writers; i += 2 {
					args := map[int][]string{0: set, 1: fence}[side]
					wg.Go(func() { res[i] = pinfs(t, a.env, args...) })
				}
			}
			// moved waits (bounded) until the gate has moved past cur.
			moved := func(first string) {
				for deadline := time.Now().Add(90 * time.Second); a.show(t, "race").Generation == cur.Generation; {
					if time.Now().After(deadline) {
						t.Errorf("round %d: the %s started first, and the gate did not move within 90s", round, first)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			first := [...]string{"alias sets", "fences", "none"}[round%3]
			switch first {
			case "alias sets":
				launch(0)
				moved(first)
				launch(1)
			case "fences":
				launch(1)
				moved(first)
				launch(0)
			default:
				launch(0)
				launch(1)
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(90 * time.Second):
				t.Fatalf("round %d: %d pinfs processes still running after 90s", round, writers)
			}

			var setWins, fenceWins []result
			for i, r := range res {
				what := map[bool]string{true: "fence", false: "alias set"}[i%2 == 1]
				switch r.code {
				case 0:
					if i%2 == 1 {
						fenceWins = append(fenceWins, r)
					} else {
						setWins = append(setWins, r)
					}
				case 1:
					if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "pinfs "+what+": ") {
						t.Errorf("round %d: a losing %s did not say why on one line: %v", round, what, r)
					} else if why := strings.TrimPrefix(lines[0], "pinfs "+what+": "); !lostBecause(why, i%2 == 1, cur) {
						t.Errorf("round %d: a losing %s said %q; want that the gate moved since generation %d (alias set) or that the watermark is at %d already (fence)",
							round, what, why, cur.Generation, cur.TombstoneWatermark+1)
					}
				default:
					t.Errorf("round %d: %s exited %d, want 0 or 1: %v", round, what, r.code, r)
				}
			}
			g := cur.Generation
			if len(fenceWins) != 1 || len(setWins) > 1 {
				t.Fatalf("round %d: %d activations and %d fences committed, want at most 1 and exactly 1", round, len(setWins), len(fenceWins))
			}
			switch {
			case first == "alias sets" && len(setWins) != 1:
				t.Fatalf("round %d: the alias sets started first, yet none committed", round)
			case first == "fences" && len(setWins) != 0:
				t.Fatalf("round %d: the fences started first and committed, yet an alias set committed too: %v", round, setWins[0])
			}
			hist := a.history(t, "race")
			commits := int64(1 + len(setWins))
			if got := hist[0].Generation; got != g+commits {
				t.Fatalf("round %d: gate at generation %d after %d commits from %d", round, got, commits, g)
			}
			wantFence := gateRecord{Generation: g + commits, Digest: cur.Digest, Op: "fence", TombstoneWatermark: cur.TombstoneWatermark + 1}
			if len(setWins) == 1 {
				activations++
				wantFence.Digest = c
				if w := fmt.Sprintf("race generation %d -> %s", g+1, c); !strings.Contains(setWins[0].stdout, w) {
					t.Errorf("round %d: the winning alias set printed %q, want %q", round, setWins[0].stdout, w)
				}
				if r := hist[1]; r.Generation != g+1 || r.Op != "set" || r.Digest != c || r.TombstoneWatermark != cur.TombstoneWatermark {
					t.Errorf("round %d: the activation's record %+v", round, r)
				}
			} else if st := a.status(t, c, s.policy).State; st != "APPROVED" {
				t.Errorf("round %d: the fence won, the candidate is %s, want APPROVED", round, st)
			}
			if w := fmt.Sprintf("race generation %d: tombstoneWatermark %d", g+commits, cur.TombstoneWatermark+1); !strings.Contains(fenceWins[0].stdout, w) {
				t.Errorf("round %d: the winning fence printed %q, want %q", round, fenceWins[0].stdout, w)
			}
			top := hist[0]
			top.Prev = ""
			if top != wantFence {
				t.Errorf("round %d: gate record %+v, want %+v", round, top, wantFence)
			}
		}
		t.Logf("%d rounds of %d writers: the activation won %d, the fence %d", rounds, writers, activations, rounds-activations)
		if activations == 0 || activations == rounds {
			t.Errorf("%d rounds: the activation won %d, the fence %d; want each to win some", rounds, activations, rounds-activations)
		}
	})
}

// lostBecause reports whether why is a reason a writer of TestAdmissionRace
// may lose for in a round that started at gate record cur: an alias set
// (expecting cur's generation) because the gate moved from it, before or
// while the change was prepared; a fence, which retries after a lost
// race, only because another fence moved the watermark to where it asked.
func lostBecause(why string, isFence bool, cur gateRecord) bool {
	if isFence {
		return why == fmt.Sprintf("gate race: the tombstone watermark is at %d already; a fence only moves forward (asked %d)",
			cur.TombstoneWatermark+1, cur.TombstoneWatermark+1)
	}
	g := cur.Generation
	for _, now := range []int64{g + 1, g + 2} {
		if strings.HasPrefix(why, fmt.Sprintf("gate race is at generation %d, not the expected %d: ", now, g)) ||
			strings.Contains(why, fmt.Sprintf("gate race moved to generation %d while this change was prepared at generation %d: ", now, g)) {
			return true
		}
	}
	return false
}
