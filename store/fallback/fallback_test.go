package fallback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
)

// fake is a store that answers from data, or fails with err; it counts
// its calls by method.
type fake struct {
	name string
	data []byte

	mu    sync.Mutex
	err   error // every call fails with it
	cutAt int   // > 0: ReadContent bodies fail after this many bytes
	calls map[string]int
	last  string // the last read's arguments
}

func (f *fake) count(m, args string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[m]++
	f.last = args
	return f.err
}

func (f *fake) n(m string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[m]
}

func (f *fake) set(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *fake) String() string { return f.name }

func (f *fake) Get(ctx context.Context, key string) ([]byte, error) {
	if err := f.count("Get", key); err != nil {
		return nil, err
	}
	return f.data, nil
}

func (f *fake) Put(context.Context, string, []byte) error { return errors.New("read-only") }

func (f *fake) PutCAS(context.Context, string, io.Reader, int64) (store.Object, error) {
	return store.Object{}, errors.New("read-only")
}

func (f *fake) ReadRange(ctx context.Context, obj store.Object, off, length int64) (io.ReadCloser, error) {
	if err := f.count("ReadRange", fmt.Sprintf("%s %d %d", obj.CAS, off, length)); err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(f.data[off : off+length])), nil
}

func (f *fake) Stat(context.Context, store.Object) (store.Info, error) {
	return store.Info{}, errors.New("no stat")
}

func (f *fake) ReadContent(ctx context.Context, c store.Content, off, length int64, fresh bool) (io.ReadCloser, error) {
	if err := f.count("ReadContent", fmt.Sprintf("%s %d %d %v", c.Digest, off, length, fresh)); err != nil {
		return nil, err
	}
	if length < 0 {
		length = int64(len(f.data)) - off
	}
	var r io.Reader = bytes.NewReader(f.data[off : off+length])
	if f.cutAt > 0 {
		r = io.MultiReader(io.LimitReader(r, int64(f.cutAt)), errReader{io.ErrUnexpectedEOF})
	}
	return io.NopCloser(r), nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// only is a plain store.Store: no ReadContent.
type only struct{ store.Store }

var errDown = fmt.Errorf("connection refused: %w", store.ErrUnreachable)

func newPair() (*fake, *fake, *Store, *time.Time) {
	p := &fake{name: "http://tier", data: []byte("0123456789")}
	fb := &fake{name: "s3://bucket", data: []byte("0123456789")}
	s := New(p, only{fb}, nil)
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	return p, fb, s, &now
}

var member = store.Content{Object: store.Object{CAS: "blake3:obj"}, Digest: "blake3:abc", Size: 10}

// read returns a function that reads all of what ReadContent returned.
func read(t *testing.T) func(io.ReadCloser, error) string {
	return func(rc io.ReadCloser, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
}

// TestHealthyPrimaryOnly: while the primary answers, the fallback is
// never asked, not even for an answer that the bytes are missing.
func TestHealthyPrimaryOnly(t *testing.T) {
	p, fb, s, _ := newPair()
	ctx := context.Background()
	if got := read(t)(s.ReadContent(ctx, member, 2, 3, false)); got != "234" {
		t.Fatalf("read %q", got)
	}
	if _, err := s.Get(ctx, "manifests/sha256/x"); err != nil {
		t.Fatal(err)
	}
	p.set(fmt.Errorf("tier: %w", store.ErrNotFound))
	if _, err := s.Get(ctx, "manifests/sha256/y"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing: %v, want ErrNotFound", err)
	}
	p.set(fmt.Errorf("tier: %w", store.ErrTooLarge))
	if _, err := s.Get(ctx, "manifests/sha256/y"); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("too large: %v, want ErrTooLarge", err)
	}
	if n := fb.n("Get") + fb.n("ReadRange"); n != 0 {
		t.Fatalf("fallback asked %d times while the primary answered", n)
	}
	if s.Served() != 0 {
		t.Fatalf("Served %d", s.Served())
	}
}

// TestDownPrimaryHold: a primary that does not answer sends the read to
// the fallback (by the pinned object), and every read for Hold after it
// without asking the primary; then the primary is asked again.
func TestDownPrimaryHold(t *testing.T) {
	p, fb, s, now := newPair()
	ctx := context.Background()
	p.set(errDown)
	if got := read(t)(s.ReadContent(ctx, member, 4, -1, false)); got != "456789" {
		t.Fatalf("read %q", got)
	}
	if fb.last != "blake3:obj 4 6" {
		t.Fatalf("fallback read %q, want the pinned object from 4 for 6 bytes", fb.last)
	}
	if _, err := s.Get(ctx, "manifests/sha256/x"); err != nil {
		t.Fatal(err)
	}
	if p.n("ReadContent") != 1 || p.n("Get") != 0 {
		t.Fatalf("primary asked %v within Hold, want the one ReadContent that failed", p.calls)
	}
	*now = now.Add(Hold)
	p.set(nil)
	if got := read(t)(s.ReadContent(ctx, member, 0, 2, false)); got != "01" {
		t.Fatalf("read %q", got)
	}
	if p.n("ReadContent") != 2 || fb.n("ReadRange") != 1 {
		t.Fatalf("after Hold: primary %v, fallback %v", p.calls, fb.calls)
	}
	if s.Served() != 0 {
		t.Fatalf("Served %d after the primary answered again, want it reset", s.Served())
	}
}

// TestCutBodyMarksDown: a body the primary cuts short fails the read (the
// caller resumes) and marks the primary down, so that the resumed read
// goes to the fallback at once.
func TestCutBodyMarksDown(t *testing.T) {
	p, fb, s, _ := newPair()
	p.cutAt = 3
	ctx := context.Background()
	rc, err := s.ReadContent(ctx, member, 0, -1, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if string(b) != "012" || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut read: %q, %v", b, err)
	}
	if got := read(t)(s.ReadContent(ctx, member, 3, -1, false)); got != "3456789" {
		t.Fatalf("resumed read %q", got)
	}
	if p.n("ReadContent") != 1 || fb.n("ReadRange") != 1 {
		t.Fatalf("primary %v, fallback %v", p.calls, fb.calls)
	}
}

// TestCancelAndStall: a read its caller canceled is not the primary's
// failure; one cut off because it stalled (store.ErrStalled as the
// context's cause) is.
func TestCancelAndStall(t *testing.T) {
	p, fb, s, _ := newPair()
	p.set(context.Canceled)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.ReadContent(ctx, member, 0, 1, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
	if fb.n("ReadRange") != 0 || !s.up() {
		t.Fatal("a canceled read went to the fallback or marked the primary down")
	}
	sctx, scancel := context.WithCancelCause(context.Background())
	scancel(store.ErrStalled)
	if _, err := s.ReadContent(sctx, member, 0, 1, false); err != nil {
		t.Fatalf("stalled: %v", err) // the fake fallback ignores ctx
	}
	if fb.n("ReadRange") != 1 || s.up() {
		t.Fatal("a stalled read did not go to the fallback")
	}
}

// TestFallbackByContent: a fallback that reads by content (another tier)
// is asked by content, with fresh passed on.
func TestFallbackByContent(t *testing.T) {
	p := &fake{name: "http://a", err: errDown}
	fb := &fake{name: "http://b", data: []byte("abcdefghij")}
	s := New(p, fb, nil)
	if got := read(t)(s.ReadContent(context.Background(), member, 1, 2, true)); got != "bc" {
		t.Fatalf("read %q", got)
	}
	if !strings.HasSuffix(fb.last, " true") || fb.n("ReadContent") != 1 {
		t.Fatalf("fallback got %q %v", fb.last, fb.calls)
	}
}
