package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/verify"
)

// readChunk is the size of the reads fed to the trackers: FUSE's largest
// read request (128 KiB), as a mount sees them.
const readChunk = 128 << 10

// recordStats describes what runbench wrote; it is printed as JSON.
type recordStats struct {
	Runs     int   `json:"runs"`
	Events   int   `json:"consumed_events"` // consumed events written
	SetBytes int64 `json:"set_bytes"`       // bytes of their `set` texts
	MaxSet   int   `json:"max_set"`         // the largest `set` text
	Members  int64 `json:"members_opened"`  // summed over the runs
	Bytes    int64 `json:"bytes_read"`      // summed over the runs
	// Integrity counts the integrity events written, by kind.
	Integrity map[string]int64 `json:"integrity"`
	Seconds   float64          `json:"seconds"`
}

// writer writes runs of one snapshot to one record file.
type writer struct {
	path, store string
	digest      verify.Digest
	tab         *verify.Table

	mu sync.Mutex // guards st: small runs are written concurrently
	st recordStats
}

// count updates w's stats under its lock.
func (w *writer) count(f func(st *recordStats)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(&w.st)
}

// open opens run id in the record as a mount of w.store with the
// default flush interval does.
func (w *writer) open(ctx context.Context, id string) (*runrecord.Record, error) {
	w.count(func(st *recordStats) { st.Runs++ })
	return runrecord.Open(ctx, runrecord.Options{URL: w.path, RunID: id, Digest: w.digest, Store: w.store, FlushInterval: time.Minute})
}

// readWhole feeds tr the reads of member i from start to end, in
// readChunk pieces, after opening it, and returns its size.
func (w *writer) readWhole(tr *consumed.Tracker, i int) int64 {
	tr.Opened(i)
	size := w.tab.Size(i)
	for off := int64(0); off < size; off += readChunk {
		tr.Read(i, off, min(readChunk, size-off))
	}
	return size
}

// flush writes tr's delta as a consumed event, nothing when it is empty.
func (w *writer) flush(ctx context.Context, rec *runrecord.Record, tr *consumed.Tracker) error {
	d := tr.Delta()
	if d.Empty() {
		return nil
	}
	text := d.Encode()
	if err := rec.Emit(ctx, runrecord.Event{Event: runrecord.ConsumedSet, Set: text}); err != nil {
		return err
	}
	w.count(func(st *recordStats) {
		st.Events++
		st.SetBytes += int64(len(text))
		st.MaxSet = max(st.MaxSet, len(text))
	})
	return nil
}

// end writes run_end with totals and counts them.
func (w *writer) end(ctx context.Context, rec *runrecord.Record, tot runrecord.Totals) error {
	w.count(func(st *recordStats) {
		st.Members += tot.MembersOpened
		st.Bytes += tot.BytesServed
	})
	return rec.Emit(ctx, runrecord.Event{Event: runrecord.RunEnd, Totals: &tot})
}

// full writes run id: it opens and reads in full every member of the
// table in shuffled order, flushing its consumed delta deltas times
// evenly, then writes run_end.
func (w *writer) full(ctx context.Context, id string, deltas int, seed uint64) error {
	rec, err := w.open(ctx, id)
	if err != nil {
		return err
	}
	defer rec.Close(ctx)
	n := w.tab.Len()
	order := rand.New(rand.NewPCG(seed, 1)).Perm(n)
	tr := consumed.NewTracker(w.tab)
	var bytes int64
	for k := range deltas {
		for _, i := range order[k*n/deltas : (k+1)*n/deltas] {
			bytes += w.readWhole(tr, i)
		}
		if err := w.flush(ctx, rec, tr); err != nil {
			return err
		}
	}
	if err := w.end(ctx, rec, runrecord.Totals{MembersOpened: tr.MembersOpened(), BytesServed: bytes}); err != nil {
		return err
	}
	return rec.Close(ctx)
}

// small writes runs runs named <prefix>-000, -001, ..., jobs at a time
// (concurrent runs append to one record, and their fsyncs overlap), each
// on about members random members (a quarter of them read in part, the
// first half of each) in three consumed deltas plus a last one at
// run_end. Every tenth run has a mismatch event, every fiftieth a
// fetch_failed.
func (w *writer) small(ctx context.Context, prefix string, runs, members, jobs int, seed uint64) error {
	next := make(chan int)
	errs := make(chan error, jobs)
	var wg sync.WaitGroup
	for range jobs {
		wg.Go(func() {
			for j := range next {
				if err := w.smallRun(ctx, fmt.Sprintf("%s-%03d", prefix, j), rand.New(rand.NewPCG(seed, uint64(j))), j, members); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
feed:
	for j := range runs {
		select {
		case next <- j:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil && len(errs) > 0 {
		err = <-errs
	}
	return err
}

// smallRun writes small run j, named id.
func (w *writer) smallRun(ctx context.Context, id string, r *rand.Rand, j, members int) error {
	rec, err := w.open(ctx, id)
	if err != nil {
		return err
	}
	defer rec.Close(ctx)
	if err := w.smallEvents(ctx, rec, r, j, members); err != nil {
		return fmt.Errorf("run %s: %w", id, err)
	}
	return rec.Close(ctx)
}

// smallEvents writes the events of small run j after its run_start.
func (w *writer) smallEvents(ctx context.Context, rec *runrecord.Record, r *rand.Rand, j, members int) error {
	tot := runrecord.Totals{}
	tr := consumed.NewTracker(w.tab)
	third := max(1, members/3)
	for k := range members {
		i := r.IntN(w.tab.Len())
		if k%4 == 3 {
			tr.Opened(i)
			half := w.tab.Size(i) / 2
			tr.Read(i, 0, half)
			tot.BytesServed += half
		} else {
			tot.BytesServed += w.readWhole(tr, i)
		}
		if k%third == third-1 {
			if err := w.flush(ctx, rec, tr); err != nil {
				return err
			}
		}
		if k == members/2 && j%10 == 3 {
			tot.Mismatches++
			if err := w.integrity(ctx, rec, i, runrecord.Mismatch); err != nil {
				return err
			}
		}
		if k == members/2 && j%50 == 7 {
			tot.FetchFailed++
			if err := w.integrity(ctx, rec, i, runrecord.FetchFailed); err != nil {
				return err
			}
		}
	}
	if err := w.flush(ctx, rec, tr); err != nil {
		return err
	}
	tot.MembersOpened = tr.MembersOpened()
	return w.end(ctx, rec, tot)
}

// integrity writes an integrity event of kind on member i, as a mount
// would, and counts it.
func (w *writer) integrity(ctx context.Context, rec *runrecord.Record, i int, kind string) error {
	t := w.tab
	e := runrecord.Event{Event: kind, Path: t.Path(i), MemberID: t.ID(i), Expected: t.Digest(i),
		Source: "cas:" + t.Digest(i), Range: &runrecord.Range{Off: 0, Len: 16 << 10}}
	if kind == runrecord.Mismatch {
		e.From, e.Error = runrecord.FromNetwork, "block 0: BLAKE3 mismatch (runbench: synthetic event)"
	} else {
		e.Error = "GET: connection reset by peer (runbench: synthetic event)"
	}
	if err := rec.Emit(ctx, e); err != nil {
		return err
	}
	w.count(func(st *recordStats) { st.Integrity[kind]++ })
	return nil
}
