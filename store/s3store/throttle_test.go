package s3store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/verify/b3"
)

// TestThrottledSentinel: the answers by which S3 and its look-alikes ask a
// client to slow down wrap store.ErrThrottled, and a ranged GET makes one
// attempt: its caller (the block reader) is the one retry layer.
func TestThrottledSentinel(t *testing.T) {
	for _, c := range []struct {
		status int
		code   string
	}{
		{http.StatusServiceUnavailable, "SlowDown"},
		{http.StatusServiceUnavailable, "ServiceUnavailable"},
		{http.StatusTooManyRequests, "TooManyRequests"},
		{http.StatusBadRequest, "RequestLimitExceeded"},
		{http.StatusBadRequest, "Throttling"},
	} {
		t.Run(c.code, func(t *testing.T) {
			f, cl := newFake(t)
			f.createBucket("data", "Enabled")
			v1 := f.put("data", "k", []byte("0123456789"))
			f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
				writeErr(w, r, c.status, c.code)
				return true
			})
			_, err := readRange(cl, mustVersion(t, "data", "k", v1), 2, 3)
			if !errors.Is(err, store.ErrThrottled) {
				t.Errorf("ReadRange: %v; want store.ErrThrottled", err)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("%d requests for one ranged read; want 1 (no SDK retries)", n)
			}
		})
	}
}

// memberOutboards serves the outboard of one member, as the metadata
// cache would.
type memberOutboards map[b3.Sum][]byte

func (o memberOutboards) Outboard(ctx context.Context, d b3.Sum, size int64, fresh bool) ([]byte, error) {
	return o[d], nil
}

type events struct {
	mu sync.Mutex
	ev []blocks.Event
}

func (e *events) Report(ctx context.Context, ev blocks.Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ev = append(e.ev, ev)
	return nil
}

// throttledMember puts a 5 MiB member and returns it with a block reader
// over c whose reads time out after readTimeout.
func throttledMember(t *testing.T, f *fakeS3, c *Client, readTimeout time.Duration) (*blocks.Member, []byte, *blocks.Reader, *events) {
	t.Helper()
	data := bytes.Repeat([]byte("pinfs throttled "), 5<<20/16)
	d, ob, err := b3.Encode(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	f.createBucket("data", "Enabled")
	obj := mustVersion(t, "data", "big", f.put("data", "big", data))
	ev := &events{}
	r, err := blocks.New(blocks.Config{
		Objects: c, Outboards: memberOutboards{d: ob}, MemBytes: 64 << 20, Reporter: ev,
		ReadTimeout: readTimeout, StallTimeout: readTimeout / 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return &blocks.Member{Path: "big", Digest: d, Size: int64(len(data)), Object: obj}, data, r, ev
}

func gets(f *fakeS3) int {
	n := 0
	for _, r := range f.requests() {
		if r.Method == http.MethodGet {
			n++
		}
	}
	return n
}

// TestThrottledForeverFailsClosed: when the store answers 503 SlowDown to
// everything, a read of a 5 MiB member fails within the read timeout, with
// few GETs (the SDK's retries no longer multiply the block reader's), and
// a fetch_failed event. It took 114 GETs and 74 s before.
func TestThrottledForeverFailsClosed(t *testing.T) {
	f, c := newFake(t)
	const readTimeout = 3 * time.Second
	m, _, r, ev := throttledMember(t, f, c, readTimeout)
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		writeErr(w, r, http.StatusServiceUnavailable, "SlowDown")
		return true
	})
	start := time.Now()
	n, err := r.ReadAt(context.Background(), m, make([]byte, 128<<10), 0)
	took := time.Since(start)
	t.Logf("503 forever: read failed after %v and %d GETs: %v", took.Round(time.Millisecond), gets(f), err)
	if n != 0 || err == nil || !errors.Is(err, store.ErrThrottled) {
		t.Fatalf("ReadAt = %d, %v; want a failure that wraps store.ErrThrottled", n, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Errorf("ReadAt: %v would be EINTR, want EIO", err)
	}
	if took > readTimeout+5*time.Second {
		t.Errorf("read failed after %v; read timeout %v", took, readTimeout)
	}
	if g := gets(f); g > 40 {
		t.Errorf("%d GETs; want at most 40", g)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var block0 bool
	for _, e := range ev.ev {
		block0 = block0 || e.Kind == blocks.KindFetchFailed && e.Off == 0 && errors.Is(e.Err, store.ErrThrottled)
	}
	if !block0 {
		t.Errorf("events %+v; want a fetch_failed of block 0", ev.ev)
	}
}

// TestThrottledBurstReads: a few seconds of 503 SlowDown answers are
// waited out and the member reads whole and correct.
func TestThrottledBurstReads(t *testing.T) {
	f, c := newFake(t)
	m, data, r, _ := throttledMember(t, f, c, 30*time.Second)
	until := time.Now().Add(3 * time.Second)
	var throttled atomic.Int32
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if time.Now().After(until) {
			return false
		}
		throttled.Add(1)
		writeErr(w, r, http.StatusServiceUnavailable, "SlowDown")
		return true
	})
	defer func() { t.Logf("%d requests throttled, %d in all", throttled.Load(), len(f.requests())) }()
	got := make([]byte, m.Size)
	n, err := r.ReadAt(context.Background(), m, got, 0)
	if err != nil && err != io.EOF || int64(n) != m.Size || !bytes.Equal(got, data) {
		t.Fatalf("ReadAt = %d, %v; bytes equal %v", n, err, bytes.Equal(got[:n], data[:n]))
	}
}
