package gate

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/s3test"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/dial"
	"github.com/pinfs/pinfs/store/storetest"
	"github.com/pinfs/pinfs/verify"
)

const (
	raceRounds  = 20
	raceWriters = 32
	roundLimit  = 20 * time.Second // a round whose writers cannot all reach the swap fails
)

// barrier holds n callers until all n have arrived.
type barrier struct {
	n, arrived int
	mu         sync.Mutex
	all        chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, all: make(chan struct{})} }

func (b *barrier) wait(ctx context.Context) error {
	b.mu.Lock()
	if b.arrived++; b.arrived == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for %d writers at the swap: %w", b.n, ctx.Err())
	}
}

// racingStore holds every Swap until all the round's writers have reached
// theirs, so that their conditional writes race at the store itself.
type racingStore struct {
	Store
	b *barrier
}

func (s racingStore) Swap(ctx context.Context, key string, data []byte, rev string) error {
	if err := s.b.wait(ctx); err != nil {
		return err
	}
	return s.Store.Swap(ctx, key, data, rev)
}

// race runs raceRounds rounds of raceWriters concurrent commits to one gate
// in st. Each writer reads the head and commits with Update without retry,
// expecting the generation it read; half of them activate a digest, half
// advance the tombstone fence. All of a round's writers reach the swap
// before any swaps. Exactly one must commit each round and the others
// fail with ErrConflict saying the gate moved; afterwards the history has
// every generation from 1, links each winner, and nothing else.
func race(t *testing.T, st Store) {
	ctx := t.Context()
	first := mustUpdate(t, openGate(t, st, "race"), fence(0))
	winners := []verify.Digest{first.RecordDigest()}
	for round := range raceRounds {
		rctx, cancel := context.WithTimeout(ctx, roundLimit)
		g := openGate(t, racingStore{st, newBarrier(raceWriters)}, "race")
		errs := make([]error, raceWriters)
		recs := make([]*Record, raceWriters)
		var wg sync.WaitGroup
		for i := range raceWriters {
			wg.Go(func() {
				head, err := g.Head(rctx)
				if err != nil {
					errs[i] = err
					return
				}
				recs[i], errs[i] = g.Update(rctx, false, func(cur *Record) (*Record, error) {
					if err := g.Expect(cur, head.Generation); err != nil {
						return nil, err
					}
					if i%2 == 0 {
						cur.Op, cur.Digest = OpSet, snap(fmt.Sprint(round, i))
					} else {
						cur.Op, cur.TombstoneWatermark = OpFence, cur.TombstoneWatermark+1
					}
					cur.Reason = fmt.Sprintf("round %d writer %d", round, i)
					return cur, nil
				})
			})
		}
		wg.Wait()
		cancel()
		gen := int64(round + 2)
		moved := fmt.Sprintf("gate race moved to generation %d while this change was prepared at generation %d", gen, gen-1)
		for i, err := range errs {
			if err != nil && !strings.Contains(err.Error(), moved) {
				t.Fatalf("round %d writer %d: %v; want an error saying %q", round, i, err, moved)
			}
		}
		winner := storetest.OneWinner(t, fmt.Sprintf("round %d", round), errs)
		if r := recs[winner]; r.Generation != gen || r.Prev != winners[len(winners)-1] {
			t.Fatalf("round %d: the winner committed %+v; want generation %d after %s", round, r, gen, winners[len(winners)-1])
		}
		winners = append(winners, recs[winner].RecordDigest())
	}

	log, err := openGate(t, st, "race").Log(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != len(winners) {
		t.Fatalf("Log has %d records; want %d", len(log), len(winners))
	}
	for i, r := range log {
		want := len(winners) - 1 - i
		if r.Generation != int64(want+1) || r.RecordDigest() != winners[want] {
			t.Fatalf("Log[%d] = generation %d %s; want generation %d %s", i, r.Generation, r.RecordDigest(), want+1, winners[want])
		}
	}
	// A record is stored only once the head held it: the losers leave none.
	keys, err := st.(store.KeyLister).List(ctx, "gates/race/records/")
	if err != nil || len(keys) != len(winners) {
		t.Fatalf("records/ holds %d keys, %v; want %d", len(keys), err, len(winners))
	}
}

func TestRaceLocal(t *testing.T) {
	st, _ := newLocal(t)
	race(t, st)
}

// TestRaceS3 runs the race against versitygw (integration/s3test), whose
// conditional PUTs (v1.8.0) are atomic per key, through a store opened the
// way the pinfs commands open one.
func TestRaceS3(t *testing.T) {
	_, st := newS3(t)
	race(t, st)
}

// newS3 starts versitygw (skipped in -short) and returns it and a store
// at s3://gates/pinfs (a versioned bucket) opened the way the pinfs
// commands open one.
func newS3(t *testing.T) (*s3test.Server, Store) {
	t.Helper()
	if testing.Short() {
		t.Skip("real S3 server; not in -short")
	}
	srv := s3test.Start(t)
	srv.UseEnv(t)
	srv.CreateBucket(t, "gates", true)
	st, err := dial.Open(t.Context(), "s3://gates/pinfs")
	if err != nil {
		t.Fatal(err)
	}
	return srv, st.(Store)
}

// TestRaceProcesses: processes that each commit to one gate in a local
// store, retrying lost races, lose no commit: the history holds every
// commit that a process was told it made, with no gap.
func TestRaceProcesses(t *testing.T) {
	if dir := os.Getenv("PINFS_GATE_RACE_DIR"); dir != "" {
		raceChild(t, dir)
		return
	}
	const procs, each = 6, 8
	st, dir := newLocal(t)
	mustUpdate(t, openGate(t, st, "race"), fence(0))
	var wg sync.WaitGroup
	outs := make([][]byte, procs)
	errs := make([]error, procs)
	for i := range procs {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestRaceProcesses$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "PINFS_GATE_RACE_DIR="+dir, "PINFS_GATE_RACE_EACH="+strconv.Itoa(each), "PINFS_GATE_RACE_ID="+strconv.Itoa(i))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		wg.Go(func() { errs[i] = cmd.Run(); outs[i] = out.Bytes() })
	}
	wg.Wait()
	committed := map[verify.Digest]bool{}
	for i := range procs {
		if errs[i] != nil {
			t.Fatalf("process %d: %v\n%s", i, errs[i], outs[i])
		}
		sc := bufio.NewScanner(bytes.NewReader(outs[i]))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "committed "); ok {
				committed[verify.Digest(d)] = true
			}
		}
	}
	if len(committed) != procs*each {
		t.Fatalf("the processes report %d commits; want %d", len(committed), procs*each)
	}
	log, err := openGate(t, st, "race").Log(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1+procs*each {
		t.Fatalf("Log has %d records; want %d", len(log), 1+procs*each)
	}
	for _, r := range log[:procs*each] {
		delete(committed, r.RecordDigest())
	}
	if len(committed) != 0 {
		t.Fatalf("%d reported commits are not in the history", len(committed))
	}
}

// raceChild commits PINFS_GATE_RACE_EACH changes to the gate "race" in
// the local store at dir, with retry, and prints each record's digest.
func raceChild(t *testing.T, dir string) {
	st, err := dial.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	g := openGate(t, st, "race")
	each, _ := strconv.Atoi(os.Getenv("PINFS_GATE_RACE_EACH"))
	id := os.Getenv("PINFS_GATE_RACE_ID")
	for n := range each {
		r, err := g.Update(t.Context(), true, func(cur *Record) (*Record, error) {
			if n%2 == 0 {
				cur.Op, cur.Digest = OpSet, snap(id+"/"+strconv.Itoa(n))
			} else {
				cur.Op, cur.TombstoneWatermark = OpFence, cur.TombstoneWatermark+1
			}
			cur.Reason = "process " + id
			return cur, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("committed %s\n", r.RecordDigest())
	}
}
