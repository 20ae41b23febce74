package runrecord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pinfs/pinfs/store"
)

// getJobs is how many GETs a reader has in flight at once.
const getJobs = 16

// openListing reaches the store of src, which must list keys.
func openListing(ctx context.Context, src Source) (store.Blobs, store.KeyLister, error) {
	b, err := src.Open(ctx, src.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("runrecord: %w", err)
	}
	l, ok := b.(store.KeyLister)
	if !ok {
		return nil, nil, fmt.Errorf("runrecord: %s: the store cannot list keys, so its run record cannot be read", src.URL)
	}
	return b, l, nil
}

// eventName is what the key of an event object says about it (see eventKey).
type eventName struct {
	key   string
	runID string
	time  time.Time
	seq   int64
	event string
}

// parseEventKey parses runs/<run-id>/events/<time>-<seq>-<event>-<hash>.json.
func parseEventKey(key string) (eventName, bool) {
	rest, ok := strings.CutPrefix(key, "runs/")
	if !ok {
		return eventName{}, false
	}
	runID, name, ok := strings.Cut(rest, "/events/")
	name, ok2 := strings.CutSuffix(name, ".json")
	parts := strings.Split(name, "-")
	if !ok || !ok2 || len(parts) != 4 || checkRunID(runID) != nil {
		return eventName{}, false
	}
	t, err := time.Parse(keyTime, parts[0])
	seq, serr := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || serr != nil {
		return eventName{}, false
	}
	return eventName{key: key, runID: runID, time: t, seq: seq, event: parts[2]}, true
}

// readRunStore adds the events of run runID in the store of src to c
// (only the consumed ones with consumedOnly, the only objects it GETs
// then) and its binding's digest and permit, and reports whether the
// store holds any key of the run.
func readRunStore(ctx context.Context, src Source, runID string, consumedOnly bool, c *collector) (found bool, err error) {
	blobs, lister, err := openListing(ctx, src)
	if err != nil {
		return false, err
	}
	keys, err := lister.List(ctx, "runs/"+runID+"/")
	if err != nil {
		return false, fmt.Errorf("runrecord: list run %s: %w", runID, err)
	}
	var want []string
	bound := false
	for _, k := range keys {
		if k == bindingKey(runID) {
			bound = true
		}
		if n, ok := parseEventKey(k); ok && n.runID == runID && (!consumedOnly || n.event == ConsumedSet) {
			want = append(want, k)
		}
	}
	if bound && !consumedOnly {
		b, err := getBinding(ctx, blobs, src.URL, runID)
		if err != nil {
			return false, err
		}
		if b != nil {
			c.run.Digest, c.run.Permit = b.Digest, b.Permit
		}
	}
	objs, err := getAll(ctx, blobs, want)
	if err != nil {
		return false, err
	}
	for _, data := range objs {
		if data == nil {
			continue // gone since the listing
		}
		e, ok := parseLine(data)
		if !ok || e.RunID != runID {
			c.run.Torn++
			continue
		}
		c.add(eventKey(&e, data), e)
	}
	return len(keys) > 0, nil
}

// getBinding returns run runID's binding object, nil if there is none.
func getBinding(ctx context.Context, blobs store.Blobs, url, runID string) (*binding, error) {
	key := bindingKey(runID)
	data, err := store.GetAtMost(ctx, blobs, key, store.MaxRecord)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("runrecord: binding of run %s: %w", runID, err)
	}
	return parseBinding(data, runID, key, url)
}

// maxEventBytes bounds the bytes of the event objects one getAll holds
// together (one run's events, or the lifecycle events `run list` reads of
// every run): each object is at most store.MaxRecord, but anyone who can
// append to the record can add objects, so their number is no bound.
const maxEventBytes = 1 << 30

// getAll GETs keys, getJobs at a time, and returns their bytes in the
// order of keys; a key that is gone (store.ErrNotFound) gets nil. It
// stops at the first other error, and once the objects hold more than
// maxEventBytes together.
func getAll(ctx context.Context, b store.Blobs, keys []string) ([][]byte, error) {
	return getAllAtMost(ctx, b, keys, maxEventBytes)
}

// getAllAtMost is getAll with the bound on the objects' total size.
func getAllAtMost(ctx context.Context, b store.Blobs, keys []string, total int64) ([][]byte, error) {
	objs, err := store.GetAll(ctx, b, keys, getJobs, total, "event objects")
	if err != nil {
		return nil, fmt.Errorf("runrecord: %w", err)
	}
	return objs, nil
}
