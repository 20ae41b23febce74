package gate

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// slowGets is a Store whose record GETs take a while, counting them and
// the most in flight at once.
type slowGets struct {
	Store
	gets, inFlight, most atomic.Int64
}

func (s *slowGets) Get(ctx context.Context, key string) ([]byte, error) {
	if strings.Contains(key, "/records/") {
		s.gets.Add(1)
		n := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
		}
		time.Sleep(5 * time.Millisecond)
	}
	return s.Store.Get(ctx, key)
}

// TestHeadReadsHistoryInParallel: a process that has not seen a gate's
// history reads its records several at a time, each once, rather than one
// GET per generation in turn (365 round trips for a year of daily changes).
func TestHeadReadsHistoryInParallel(t *testing.T) {
	st, _ := newLocal(t)
	g := openGate(t, st, "prod")
	const gens = 40
	for i := range gens {
		mustUpdate(t, g, set(snap(fmt.Sprint(i))))
	}
	checked, generations = &checkedSet{}, &checkedSet{} // a fresh process
	t.Cleanup(func() { checked, generations = &checkedSet{}, &checkedSet{} })
	slow := &slowGets{Store: st}
	head, err := openGate(t, slow, "prod").Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if head.Generation != gens {
		t.Fatalf("head at generation %d, want %d", head.Generation, gens)
	}
	if got := slow.gets.Load(); got != gens {
		t.Errorf("Head read %d records, want each of the %d once", got, gens)
	}
	if most := slow.most.Load(); most < 2 {
		t.Errorf("at most %d record GETs in flight at once: the history was read one generation at a time", most)
	}
}

// TestLogAfterHeadReadsHistoryInParallel: Log reads every link again, so
// it reads the records several at a time even in a process that has
// checked the chain already (alias rollback: Update, then Log).
func TestLogAfterHeadReadsHistoryInParallel(t *testing.T) {
	st, _ := newLocal(t)
	g := openGate(t, st, "prod")
	const gens = 40
	for i := range gens {
		mustUpdate(t, g, set(snap(fmt.Sprint(i))))
	}
	slow := &slowGets{Store: st}
	sg := openGate(t, slow, "prod")
	if _, err := sg.Head(t.Context()); err != nil {
		t.Fatal(err)
	}
	slow.gets.Store(0)
	slow.most.Store(0)
	hist, err := sg.Log(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != gens {
		t.Fatalf("Log holds %d records, want %d", len(hist), gens)
	}
	if got := slow.gets.Load(); got != gens {
		t.Errorf("Log read %d records, want each of the %d once", got, gens)
	}
	if most := slow.most.Load(); most < 2 {
		t.Errorf("at most %d record GETs in flight at once: Log read the history one generation at a time", most)
	}
}
