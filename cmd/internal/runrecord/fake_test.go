package runrecord

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pinfs/pinfs/store"
)

var errUnreachable = errors.New("fake: dial tcp: connection refused")

// fakeBlobs is a store.Blobs and store.Creator in memory with the
// create-only Put of the real backends. It can be switched unreachable, or made to lose the
// answer of a Put that did store its bytes.
type fakeBlobs struct {
	mu      sync.Mutex
	objs    map[string][]byte
	puts    []string // keys of Puts that stored bytes, in order
	down    bool
	lostAck bool
}

func newFake() *fakeBlobs { return &fakeBlobs{objs: map[string][]byte{}} }

func (f *fakeBlobs) open(_ context.Context, url string) (store.Blobs, error) {
	if !strings.HasPrefix(url, "s3://") {
		return nil, fmt.Errorf("fake: %q", url)
	}
	return f, nil
}

func (f *fakeBlobs) setDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

func (f *fakeBlobs) Get(ctx context.Context, key string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	if f.down {
		return nil, errUnreachable
	}
	b, ok := f.objs[key]
	if !ok {
		return nil, fmt.Errorf("fake: get %s: %w", key, store.ErrNotFound)
	}
	return bytes.Clone(b), nil
}

func (f *fakeBlobs) Put(ctx context.Context, key string, data []byte) error {
	return f.put(key, data, false)
}

// Create is the exclusive create of store.Creator.
func (f *fakeBlobs) Create(ctx context.Context, key string, data []byte) error {
	return f.put(key, data, true)
}

// put stores data at key. An existing key is an error wrapping
// store.ErrExist when exclusive, and otherwise must hold the same bytes.
func (f *fakeBlobs) put(key string, data []byte, exclusive bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := store.CheckKey(key); err != nil {
		return err
	}
	if f.down {
		return errUnreachable
	}
	if old, ok := f.objs[key]; ok {
		switch {
		case exclusive:
			return fmt.Errorf("fake: create %s: %w", key, store.ErrExist)
		case bytes.Equal(old, data):
			return nil
		}
		return fmt.Errorf("fake: put %s: the key already holds different bytes", key)
	}
	f.objs[key] = bytes.Clone(data)
	f.puts = append(f.puts, key)
	if f.lostAck {
		return errUnreachable
	}
	return nil
}

// object returns the bytes at key, or nil.
func (f *fakeBlobs) object(key string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return bytes.Clone(f.objs[key])
}

// events returns the event objects of run id in key order, checking that
// each is one event line stored under its own key.
func (f *fakeBlobs) events(t testing.TB, runID string) []Event {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var keys []string
	for k := range f.objs {
		if strings.HasPrefix(k, "runs/"+runID+"/events/") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var es []Event
	for _, k := range keys {
		e := parseEvent(t, f.objs[k])
		if e.RunID != runID || eventKey(&e, f.objs[k]) != k {
			t.Fatalf("object %s holds event %s of run %s", k, eventKey(&e, f.objs[k]), e.RunID)
		}
		es = append(es, e)
	}
	return es
}

// putOrder returns the keys that Puts stored, in order.
func (f *fakeBlobs) putOrder() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.puts)
}
