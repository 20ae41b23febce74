package health

import (
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

// fake answers every fetch with err (nil: success).
type fake struct {
	store.Store // nil: the methods below are all a test calls
	mu          sync.Mutex
	err         error
}

func (f *fake) answer(err error) { f.mu.Lock(); f.err = err; f.mu.Unlock() }

func (f *fake) fail() error { f.mu.Lock(); defer f.mu.Unlock(); return f.err }

func (f *fake) Get(ctx context.Context, key string) ([]byte, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return []byte("blob"), nil
}

func (f *fake) ReadRange(ctx context.Context, obj store.Object, off, n int64) (io.ReadCloser, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return io.NopCloser(strings.NewReader("x")), nil
}

func (f *fake) Stat(ctx context.Context, obj store.Object) (store.Info, error) {
	return store.Info{Size: 1}, f.fail()
}

var (
	refused     = fmt.Errorf("s3://st: the secret key is wrong: %w", store.ErrAccessDenied)
	unreachable = fmt.Errorf("cannot reach S3 at http://h: connection refused: %w", store.ErrUnreachable)
	missing     = fmt.Errorf("get s3://d/k?versionId=v: not found: %w", store.ErrNotFound)
	throttled   = fmt.Errorf("get s3://d/k: %w", store.ErrThrottled)
	canceled    = fmt.Errorf("get s3://d/k: %w", context.Canceled)
)

// TestLastFailure walks one store through the answers a mount sees and
// checks what Last reports after each fetch.
func TestLastFailure(t *testing.T) {
	f := &fake{}
	s := New(f)
	clock := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	s.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	ctx := context.Background()
	obj := store.Object{Bucket: "d", Key: "k", VersionID: "v"}
	fetches := map[string]func() error{
		"get":       func() error { _, err := s.Get(ctx, "manifests/x"); return err },
		"getAtMost": func() error { _, err := s.GetAtMost(ctx, "manifests/x", 100); return err },
		"readRange": func() error { _, err := s.ReadRange(ctx, obj, 0, 1); return err },
		"stat":      func() error { _, err := s.Stat(ctx, obj); return err },
	}
	for name, fetch := range fetches {
		t.Run(name, func(t *testing.T) {
			step := func(answer error, wantKind store.Kind, wantMsg string) {
				t.Helper()
				f.answer(answer)
				if err := fetch(); !errors.Is(err, answer) && err != answer {
					t.Fatalf("fetch returned %v, want %v", err, answer)
				}
				got := s.Last()
				switch {
				case wantKind == "" && got != nil:
					t.Errorf("after %v: Last %+v, want none", answer, got)
				case wantKind != "" && (got == nil || got.Kind != wantKind || got.Message != wantMsg):
					t.Errorf("after %v: Last %+v, want %s %q", answer, got, wantKind, wantMsg)
				case wantKind != "" && wantMsg == answer.Error() && !got.Time.Equal(clock):
					t.Errorf("after %v: Last at %v, want the time of this fetch, %v", answer, got.Time, clock)
				}
			}
			// A canceled fetch changes nothing.
			cancel := func(want store.Kind) {
				t.Helper()
				f.answer(canceled)
				fetch()
				if l := s.Last(); want == "" && l != nil || want != "" && (l == nil || l.Kind != want) {
					t.Errorf("after a canceled fetch: %+v, want kind %q", l, want)
				}
			}
			step(nil, "", "")
			cancel("")
			step(unreachable, store.KindUnreachable, unreachable.Error())
			cancel(store.KindUnreachable)
			step(nil, "", "") // a success clears it
			step(refused, store.KindAccess, refused.Error())
			at := clock
			// Failures that say nothing of the credentials keep the refusal.
			step(unreachable, store.KindAccess, refused.Error())
			step(throttled, store.KindAccess, refused.Error())
			if !s.Last().Time.Equal(at) {
				t.Errorf("refusal's time moved to %v, want %v", s.Last().Time, at)
			}
			cancel(store.KindAccess)
			step(refused, store.KindAccess, refused.Error()) // a new refusal: a new time
			step(nil, "", "")                                // until one succeeds
			step(refused, store.KindAccess, refused.Error())
			step(missing, store.KindMissing, missing.Error()) // the store took the credentials to say so
			step(throttled, store.KindOther, throttled.Error())
			step(nil, "", "")
		})
	}
	if n := s.Answered(); n != 4*4 {
		t.Errorf("Answered() = %d, want %d", n, 4*4)
	}
}

// TestConcurrentFetches: Last and note are safe under -race.
func TestConcurrentFetches(t *testing.T) {
	f := &fake{}
	s := New(f)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				if (i+j)%3 == 0 {
					s.note(refused)
				} else {
					s.note(nil)
				}
				s.Last()
			}
		})
	}
	wg.Wait()
	s.note(nil)
	if s.Last() != nil {
		t.Errorf("Last after a success: %+v", s.Last())
	}
}

// streaming is a fake that can stream: Open counts its calls.
type streaming struct {
	fake
	opens int
}

func (s *streaming) Open(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	s.opens++
	if err := s.fail(); err != nil {
		return nil, 0, err
	}
	return io.NopCloser(strings.NewReader("streamed")), 8, nil
}

// TestOpenStreams: Open streams from a store that can, watched, and reads
// whole from one that cannot; a mount's member table must not be read
// whole because the store is watched.
func TestOpenStreams(t *testing.T) {
	ctx := context.Background()
	st := &streaming{}
	s := New(st)
	st.answer(unreachable)
	if _, _, err := s.Open(ctx, "k"); err == nil || s.Last() == nil {
		t.Fatalf("failed Open: %v, Last %v", err, s.Last())
	}
	st.answer(nil)
	rc, n, err := s.Open(ctx, "k")
	if err != nil || n != 8 || st.opens != 2 || s.Last() != nil {
		t.Fatalf("Open = %v, %d, %v after %d opens, Last %v", rc, n, err, st.opens, s.Last())
	}
	b, _ := io.ReadAll(rc)
	if string(b) != "streamed" {
		t.Fatalf("read %q", b)
	}
	whole := New(&fake{})
	rc, n, err = whole.Open(ctx, "k")
	if err != nil || n != 4 {
		t.Fatalf("Open of a store without Open = %v, %d, %v", rc, n, err)
	}
}
