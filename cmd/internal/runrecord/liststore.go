package runrecord

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pinfs/pinfs/store"
)

// storeRun is what List gathers of one run in a store.
type storeRun struct {
	names  []eventName     // every event object listed
	listed map[string]bool // their keys, and those of spooled events
	bind   *binding        // run.json
	c      collector       // the events fetched, and the spooled ones the store lacks
	t      tally
}

// listStore is List of a record in a store.
func listStore(ctx context.Context, src Source, now time.Time, alive Liveness) ([]RunInfo, error) {
	blobs, lister, err := openListing(ctx, src)
	if err != nil {
		return nil, err
	}
	keys, err := lister.List(ctx, "runs/")
	if err != nil {
		return nil, fmt.Errorf("runrecord: list runs: %w", err)
	}
	runs := map[string]*storeRun{}
	get := func(id string) *storeRun {
		r := runs[id]
		if r == nil {
			r = &storeRun{listed: map[string]bool{}}
			runs[id] = r
		}
		return r
	}
	var want []string // run.json, run_start, resume and run_end
	for _, k := range keys {
		if n, ok := parseEventKey(k); ok {
			r := get(n.runID)
			r.names = append(r.names, n)
			r.listed[k] = true
			r.t.add(n.time, n.event)
			if n.event == RunStart || n.event == Resume || n.event == RunEnd {
				want = append(want, k)
			}
		} else if id, ok := bindingRun(k); ok {
			get(id)
			want = append(want, k)
		}
	}
	objs, err := getAll(ctx, blobs, want)
	if err != nil {
		return nil, err
	}
	for i, k := range want {
		if objs[i] == nil {
			continue
		}
		if id, ok := bindingRun(k); ok {
			if b, err := parseBinding(objs[i], id, k, src.URL); err == nil {
				runs[id].bind = b
			}
			continue
		}
		n, _ := parseEventKey(k)
		if e, ok := parseLine(objs[i]); ok && e.RunID == n.runID {
			runs[n.runID].c.add(k, e)
		}
	}
	err = eachSpool(src, func(id string, lines [][]byte) {
		r := get(id)
		for _, line := range lines {
			e, ok := parseHead(line)
			if !ok || e.RunID != id {
				continue
			}
			if k := eventKey(&e, line); !r.listed[k] {
				r.listed[k] = true
				r.t.add(e.Time, e.Event)
				r.c.add(k, e)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	infos := make([]RunInfo, 0, len(runs))
	for id, r := range runs {
		if b := r.bind; b != nil {
			r.c.run.Digest, r.c.run.Permit = b.Digest, b.Permit
			if b.Permit != nil || r.t.first.IsZero() {
				r.t.add(b.Time, "")
			}
		}
		run := r.c.finish(id)
		ms, err := r.mounts(ctx, blobs, run, now, alive)
		if err != nil {
			return nil, err
		}
		infos = append(infos, r.t.info(run, ms))
	}
	return infos, nil
}

// bindingRun returns the run id of key if it is a binding, runs/<id>/run.json.
func bindingRun(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, "runs/")
	id, ok2 := strings.CutSuffix(rest, "/run.json")
	return id, ok && ok2 && checkRunID(id) == nil
}

// mounts returns run's mounts at now. When none is running, and an open
// mount's state hangs on how recently it wrote (alive cannot tell), it
// GETs the events of the window that counts, newest first, getJobs at a
// time, until a mount turns out running or the window is done.
func (r *storeRun) mounts(ctx context.Context, blobs store.Blobs, run *Run, now time.Time, alive Liveness) ([]Mount, error) {
	ms := run.Mounts(now, alive)
	from, ok := window(ms, now, alive)
	if !ok {
		return ms, nil
	}
	var todo []string
	for _, n := range r.names {
		if n.time.After(from) && !r.c.seen[n.key] {
			todo = append(todo, n.key)
		}
	}
	slices.Reverse(todo) // listed in key order, which is time order
	for len(todo) > 0 {
		batch := todo[:min(getJobs, len(todo))]
		todo = todo[len(batch):]
		objs, err := getAll(ctx, blobs, batch)
		if err != nil {
			return nil, err
		}
		for i, data := range objs {
			if e, ok := parseLine(data); ok && e.RunID == run.RunID {
				r.c.add(batch[i], e)
			}
		}
		run = r.c.finish(run.RunID)
		ms = run.Mounts(now, alive)
		if _, ok := window(ms, now, alive); !ok {
			break
		}
	}
	return ms, nil
}

// window returns the time after which an event of an open mount whose
// process alive cannot check would make it running, with ok false when
// there is no such mount or a mount is running already.
func window(ms []Mount, now time.Time, alive Liveness) (from time.Time, ok bool) {
	for _, m := range ms {
		if m.State == StateRunning {
			return time.Time{}, false
		}
	}
	for _, m := range ms {
		if m.End != nil {
			continue
		}
		if alive != nil {
			if _, known := alive(&m); known {
				continue
			}
		}
		f := now.Add(-silentIntervals * m.interval())
		if !ok || f.Before(from) {
			from, ok = f, true
		}
	}
	return from, ok
}
