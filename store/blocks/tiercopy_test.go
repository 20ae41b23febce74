package blocks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/fallback"
	"github.com/pinfs/pinfs/store/httpstore"
	"github.com/pinfs/pinfs/store/tier"
	"github.com/pinfs/pinfs/verify/b3"
)

// A tier's copy of a block, as tierOf serves it.
type tierCopy int

const (
	goodCopy       tierCopy = iota
	shortHeader             // a Content-Length 100 bytes short, and that many bytes
	truncated               // the right headers, the body ends halfway (a truncated cache file)
	truncatedStall          // the same, but the body stalls halfway (nginx's answer from one)
	flipped                 // the right length, one byte flipped
)

// tierOf is a tier in front of m's bytes: block i's copy is copyOf(i,
// bypass), bypass telling whether the request bypasses the tier's cache.
// It counts the requests per block and bypass.
type tierOf struct {
	t      *testing.T
	data   []byte
	copyOf func(i int64, bypass bool) tierCopy

	quit chan struct{} // closed when the test ends: stalled answers end

	mu   sync.Mutex
	reqs map[string]int // "i bypass"
}

func (tr *tierOf) n(i int64, bypass bool) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.reqs[fmt.Sprint(i, " ", bypass)]
}

func (tr *tierOf) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i, err := strconv.ParseInt(r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:], 10, 64)
	if err != nil || !strings.HasPrefix(r.URL.Path, "/blocks/blake3/") {
		http.NotFound(w, r)
		return
	}
	bypass := r.Header.Get(tier.BypassHeader) == "1"
	tr.mu.Lock()
	tr.reqs[fmt.Sprint(i, " ", bypass)]++
	tr.mu.Unlock()
	start := i * BlockSize
	b := bytes.Clone(tr.data[start:min(start+BlockSize, int64(len(tr.data)))])
	how := tr.copyOf(i, bypass)
	switch how {
	case shortHeader:
		w.Header().Set("Content-Length", strconv.Itoa(len(b)-100))
		w.Write(b[:len(b)-100])
		return
	case truncated, truncatedStall:
		// Serve the right headers for what is asked, but no byte of the
		// block past its middle: the server closes the connection.
		from, to := int64(0), int64(len(b))
		if rng := r.Header.Get("Range"); rng != "" {
			fmt.Sscanf(rng, "bytes=%d-%d", &from, &to)
			to++
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to-1, len(b)))
			w.Header().Set("Content-Length", strconv.FormatInt(to-from, 10))
			w.WriteHeader(http.StatusPartialContent)
		} else {
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		}
		if half := int64(len(b) / 2); from < half {
			w.Write(b[from:min(to, half)])
		}
		if how == truncatedStall {
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-tr.quit:
			}
		}
		return
	case flipped:
		b[len(b)/3] ^= 1
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
}

// objectsOnly is a store.Store that only reads objects: the fallback of
// a tier, as an s3:// store is.
type objectsOnly struct {
	store.Store
	objs *fakeStore
	mu   sync.Mutex
	n    int
}

func (o *objectsOnly) String() string { return "s3://fallback" }

func (o *objectsOnly) ReadRange(ctx context.Context, obj store.Object, off, n int64) (io.ReadCloser, error) {
	o.mu.Lock()
	o.n++
	o.mu.Unlock()
	return o.objs.ReadRange(ctx, obj, off, n)
}

func (o *objectsOnly) reads() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

// tierReader returns a Reader of the env's member m through tier tr
// (store/httpstore) and, with fb, through a fallback.Store over it and
// the env's objects, as pinfs mount --store http://... --fallback-store
// s3://... builds it; the read timeout is long, so that a read that
// waits for it fails the test's bound instead.
func tierReader(t *testing.T, e *env, tr *tierOf, fb bool) (*Reader, *objectsOnly) {
	t.Helper()
	tr.quit = make(chan struct{})
	srv := httptest.NewServer(tr)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(tr.quit) }) // first: stalled answers end, then Close
	hs, err := httpstore.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Content: hs, ReadTimeout: time.Hour, StallTimeout: 200 * time.Millisecond, Backoff: time.Millisecond}
	var objs *objectsOnly
	if fb {
		objs = &objectsOnly{objs: e.store}
		f := fallback.New(hs, objs, nil)
		cfg.Content, cfg.Fallback = f, f.Fallback()
	}
	return e.reader(cfg), objs
}

// readWithin reads all of m, its first block then the rest (a
// sequential reader, whose blocks after the first load in runs of
// several), on a goroutine, and fails the test if that has not returned
// within 20 s (a read that waits for the read timeout).
func readWithin(t *testing.T, r *Reader, m *Member) ([]byte, error) {
	t.Helper()
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b := make([]byte, m.Size)
		n, err := r.ReadAt(context.Background(), m, b[:BlockSize], 0)
		if err == nil {
			var k int
			k, err = r.ReadAt(context.Background(), m, b[BlockSize:], BlockSize)
			n += k
		}
		done <- result{b[:n], err}
	}()
	select {
	case res := <-done:
		return res.b, res.err
	case <-time.After(20 * time.Second):
		t.Fatal("the read has not returned after 20 s: it waits for the read timeout")
		return nil, nil
	}
}

// tierMember returns a member of three and a bit blocks, named for a tier.
func tierMember(e *env) *Member {
	m := e.member(3*BlockSize + 1000)
	m.Snapshot = "sha256:" + strings.Repeat("ab", 32)
	return m
}

// mismatchesFromTier returns the events, failing the test unless each is
// a mismatch From "tier" whose error contains want.
func mismatchesFromTier(t *testing.T, e *env, want string) []Event {
	t.Helper()
	evs := e.rec.all()
	for _, ev := range evs {
		if ev.Kind != KindMismatch || ev.From != FromTier || !strings.Contains(ev.Err.Error(), want) {
			t.Errorf("event %s from %q: %v; want a mismatch from the tier saying %q", ev.Kind, ev.From, ev.Err, want)
		}
	}
	return evs
}

// TestTierCopyOfTheWrongLengthIsHealed: a tier's copy of a block with a
// Content-Length that is not the block's is a bad copy: it is fetched
// once more bypassing the tier's cache, and the read gets the block at
// once (not after the read timeout), with a mismatch event From "tier"
// that says healed, and no fetch_failed (issue 37, finding 6). Blocks 1
// and 2 are bad: one in the middle of a run, one loaded alone after it.
func TestTierCopyOfTheWrongLengthIsHealed(t *testing.T) {
	for _, fb := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", fb), func(t *testing.T) {
			e := newEnv(t)
			m := tierMember(e)
			tr := &tierOf{t: t, data: e.data[m.Digest], reqs: map[string]int{}, copyOf: func(i int64, bypass bool) tierCopy {
				if !bypass && (i == 1 || i == 2) {
					return shortHeader
				}
				return goodCopy
			}}
			r, _ := tierReader(t, e, tr, fb)
			got, err := readWithin(t, r, m)
			if err != nil || !bytes.Equal(got, e.data[m.Digest]) {
				t.Fatalf("read %d bytes, %v; want the member", len(got), err)
			}
			if evs := mismatchesFromTier(t, e, "healed"); len(evs) != 2 {
				t.Fatalf("%d events; want 2 mismatches from the tier, healed", len(evs))
			}
			for _, i := range []int64{1, 2} {
				if n := tr.n(i, true); n != 1 {
					t.Errorf("block %d: %d requests bypassing the tier's cache; want 1", i, n)
				}
			}
		})
	}
}

// TestTierTruncatedCopyIsResumedPastTheTier: a tier's answer that ends
// halfway, or stalls halfway (nginx serving a truncated cache file), is
// resumed past the tier's cache (with a fallback store: from the
// fallback), so the read gets the block within a stall timeout instead
// of failing after the read timeout, with no fetch_failed (issue 37,
// finding 6).
func TestTierTruncatedCopyIsResumedPastTheTier(t *testing.T) {
	for _, bad := range []tierCopy{truncated, truncatedStall} {
		for _, fb := range []bool{false, true} {
			t.Run(fmt.Sprintf("copy%d/fallback=%v", bad, fb), func(t *testing.T) {
				e := newEnv(t)
				m := tierMember(e)
				tr := &tierOf{t: t, data: e.data[m.Digest], reqs: map[string]int{}, copyOf: func(i int64, bypass bool) tierCopy {
					if !bypass && (i == 1 || i == 2) {
						return bad
					}
					return goodCopy
				}}
				r, objs := tierReader(t, e, tr, fb)
				got, err := readWithin(t, r, m)
				if err != nil || !bytes.Equal(got, e.data[m.Digest]) {
					t.Fatalf("read %d bytes, %v; want the member", len(got), err)
				}
				if evs := e.rec.all(); len(evs) != 0 {
					t.Fatalf("events %v; want none (nothing failed verification, nothing failed)", evs)
				}
				if fb {
					if objs.reads() == 0 {
						t.Fatal("the fallback store read nothing")
					}
					return
				}
				for _, i := range []int64{1, 2} {
					if n := tr.n(i, true); n == 0 {
						t.Errorf("block %d: no request bypassing the tier's cache", i)
					}
				}
			})
		}
	}
}

// TestTierCopiesBadTwice: when the copy that bypasses the tier's cache is
// bad too (of the wrong length, or failing verification), the read fails
// at once with an error wrapping b3.ErrMismatch and a mismatch event From
// "tier" (not fetch_failed after the read timeout) without a fallback
// store; with one, the block is read from the fallback, verified, and the
// event says so (issue 37, findings 6 and 9).
func TestTierCopiesBadTwice(t *testing.T) {
	for _, bad := range []tierCopy{shortHeader, flipped} {
		for _, fb := range []bool{false, true} {
			t.Run(fmt.Sprintf("copy%d/fallback=%v", bad, fb), func(t *testing.T) {
				e := newEnv(t)
				m := tierMember(e)
				tr := &tierOf{t: t, data: e.data[m.Digest], reqs: map[string]int{}, copyOf: func(i int64, bypass bool) tierCopy {
					if i == 1 {
						return bad
					}
					return goodCopy
				}}
				r, objs := tierReader(t, e, tr, fb)
				got, err := readWithin(t, r, m)
				if !fb {
					if !errors.Is(err, b3.ErrMismatch) {
						t.Fatalf("read: %v; want an error wrapping b3.ErrMismatch", err)
					}
					// One per attempt: readahead's, and the read's own.
					if evs := mismatchesFromTier(t, e, "refetched copy failed verification"); len(evs) == 0 {
						t.Fatal("no event; want a mismatch from the tier")
					}
					return
				}
				if err != nil || !bytes.Equal(got, e.data[m.Digest]) {
					t.Fatalf("read %d bytes, %v; want the member, block 1 from the fallback store", len(got), err)
				}
				if evs := mismatchesFromTier(t, e, "the fallback store's copy verified (healed)"); len(evs) != 1 {
					t.Fatalf("%d events; want one mismatch from the tier, healed from the fallback", len(evs))
				}
				if objs.reads() != 1 || tr.n(1, true) != 1 {
					t.Fatalf("the fallback store read %d times, the tier bypassed %d times; want 1 and 1", objs.reads(), tr.n(1, true))
				}
			})
		}
	}
}
