package httpstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/tier"
	"github.com/pinfs/pinfs/verify/b3"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// within runs f on a goroutine and returns its error, or fails the test
// if f has not returned within bound: the read under test hangs.
func within(t *testing.T, bound time.Duration, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(bound):
		t.Fatalf("the read has not returned after %v: it hangs", bound)
		return nil
	}
}

// serveStalling returns a Store in front of a server that sends the
// answer's header and the first half of body (nothing at all, without
// header), then holds the response open, sending nothing, until the
// request or the test ends.
func serveStalling(t *testing.T, body []byte, header bool) *Store {
	quit := make(chan struct{})
	s := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if header {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-quit:
		}
	})
	t.Cleanup(func() { close(quit) }) // before the server's Close, which waits for the handlers
	return s
}

// TestGetStalledBodyIsCutOff: a metadata blob (a manifest) whose body
// stalls halfway, or whose answer never starts, fails with an error
// wrapping store.ErrStalled once the stall timeout passes, instead of
// hanging (issue 37, finding 5).
func TestGetStalledBodyIsCutOff(t *testing.T) {
	d, manifest, _ := verifytest.Table(3, verifytest.S3, 1)
	key := "manifests/sha256/" + d.Hex()
	for _, header := range []bool{true, false} {
		s := serveStalling(t, manifest, header)
		s.SetTimeouts(100*time.Millisecond, time.Hour)
		err := within(t, 20*time.Second, func() error {
			_, err := s.Get(context.Background(), key)
			return err
		})
		if !errors.Is(err, store.ErrStalled) {
			t.Fatalf("Get of a stalled manifest (header sent: %v) = %v; want an error wrapping store.ErrStalled", header, err)
		}
	}
}

// TestGetTrickleIsCutOffByTheReadTimeout: a body that trickles (a byte
// more often than the stall timeout) is cut off by the read timeout.
func TestGetTrickleIsCutOffByTheReadTimeout(t *testing.T) {
	d, manifest, _ := verifytest.Table(3, verifytest.S3, 1)
	quit := make(chan struct{})
	t.Cleanup(func() { close(quit) })
	s := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(manifest)))
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := range manifest {
			select {
			case <-tick.C:
			case <-r.Context().Done():
				return
			case <-quit:
				return
			}
			w.Write(manifest[i : i+1])
			w.(http.Flusher).Flush()
		}
	})
	s.SetTimeouts(time.Hour, 150*time.Millisecond)
	err := within(t, 20*time.Second, func() error {
		_, err := s.Get(context.Background(), "manifests/sha256/"+d.Hex())
		return err
	})
	if !errors.Is(err, ErrReadTimeout) {
		t.Fatalf("Get of a trickling manifest = %v; want an error wrapping ErrReadTimeout", err)
	}
}

// TestOpenStalledBodyIsCutOff: a member table streamed through Open whose
// body stalls fails its read with store.ErrStalled; one whose answer never
// starts fails Open the same way.
func TestOpenStalledBodyIsCutOff(t *testing.T) {
	key := "members/sha256/" + strings.Repeat("c", 64)
	table := bytes.Repeat([]byte("t"), 1<<16)
	s := serveStalling(t, table, true)
	s.SetTimeouts(100*time.Millisecond, time.Hour)
	err := within(t, 20*time.Second, func() error {
		rc, _, err := s.Open(context.Background(), key)
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.ReadAll(rc)
		return err
	})
	if !errors.Is(err, store.ErrStalled) {
		t.Fatalf("reading a stalled table = %v; want an error wrapping store.ErrStalled", err)
	}
	s = serveStalling(t, table, false)
	s.SetTimeouts(100*time.Millisecond, time.Hour)
	err = within(t, 20*time.Second, func() error {
		rc, _, err := s.Open(context.Background(), key)
		if err == nil {
			rc.Close()
		}
		return err
	})
	if !errors.Is(err, store.ErrStalled) {
		t.Fatalf("Open of a table whose answer never starts = %v; want an error wrapping store.ErrStalled", err)
	}
}

// TestOpenSlowBodyIsNotCutOff: a member table whose body keeps coming
// (a byte within every stall timeout) reads whole, however long past the
// stall and read timeouts it takes: a large table may take long to
// stream.
func TestOpenSlowBodyIsNotCutOff(t *testing.T) {
	table := []byte("0123456789abcdefghijklmnopqrstuvwxyz0123")
	s := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(table)))
		pace := time.NewTicker(15 * time.Millisecond) // a slow server: 40 bytes in 600 ms
		defer pace.Stop()
		for i := range table {
			<-pace.C
			w.Write(table[i : i+1])
			w.(http.Flusher).Flush()
		}
	})
	s.SetTimeouts(250*time.Millisecond, 50*time.Millisecond)
	rc, _, err := s.Open(context.Background(), "members/sha256/"+strings.Repeat("c", 64))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, table) {
		t.Fatalf("read %q, %v; want the whole table", got, err)
	}
}

// TestRedirectsRefused: an answer that redirects (to another host, here)
// is an error wrapping store.ErrBadResponse that names the redirect, and
// the other host gets no request, for metadata and blocks alike (issue
// 37, finding 7).
func TestRedirectsRefused(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.Write([]byte("x"))
	}))
	t.Cleanup(other.Close)
	for _, code := range []int{301, 302, 307, 308} {
		s := serve(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path, code)
		})
		_, err := s.Get(context.Background(), "manifests/sha256/"+strings.Repeat("c", 64))
		if !errors.Is(err, store.ErrBadResponse) || !strings.Contains(err.Error(), "redirect") {
			t.Errorf("Get answered %d = %v; want a refused redirect (store.ErrBadResponse)", code, err)
		}
		c := someMember
		c.Size = 10
		_, err = s.ReadContent(context.Background(), c, 0, -1, false)
		if !errors.Is(err, store.ErrBadResponse) || !strings.Contains(err.Error(), "redirect") {
			t.Errorf("ReadContent answered %d = %v; want a refused redirect (store.ErrBadResponse)", code, err)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the redirect's target got %d requests; want none", n)
	}
}

// TestWrongLengthIsABadCopy: a block whose answer has another length
// than the block's (Content-Length longer or shorter; a Content-Range
// of another total) is ErrWrongLength, which wraps b3.ErrMismatch, even
// when the block's bytes come first: the copy is bad, not the store down
// (issue 37, finding 6).
func TestWrongLengthIsABadCopy(t *testing.T) {
	block := bytes.Repeat([]byte("b"), 1000)
	c := someMember
	c.Size = int64(len(block))
	for _, tc := range []struct {
		name   string
		off, n int64
		h      http.HandlerFunc
	}{
		{"longer", 0, -1, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(block)+5))
			w.Write(append(bytes.Clone(block), "extra"...))
		}},
		{"shorter", 0, -1, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(block)-5))
			w.Write(block[:len(block)-5])
		}},
		{"range of another total", 10, 5, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Range", "bytes 10-14/900")
			w.Header().Set("Content-Length", "5")
			w.WriteHeader(206)
			w.Write(block[10:15])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t, tc.h)
			rc, err := s.ReadContent(context.Background(), c, tc.off, tc.n, false)
			if err == nil {
				_, err = io.ReadAll(rc)
				rc.Close()
			}
			if !errors.Is(err, ErrWrongLength) || !errors.Is(err, b3.ErrMismatch) {
				t.Fatalf("err = %v; want ErrWrongLength (a b3.ErrMismatch)", err)
			}
		})
	}
	// A later block of a range: its answer's length is checked too.
	c.Size = 2 * tier.BlockSize
	s := serve(t, func(w http.ResponseWriter, r *http.Request) {
		n := tier.BlockSize
		if strings.HasSuffix(r.URL.Path, "/1") {
			n -= 7
		}
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Write(make([]byte, n))
	})
	rc, err := s.ReadContent(context.Background(), c, 0, -1, false)
	if err == nil {
		_, err = io.ReadAll(rc)
		rc.Close()
	}
	if !errors.Is(err, ErrWrongLength) {
		t.Fatalf("a range whose second block is short: %v; want ErrWrongLength", err)
	}
}

// TestReadContentCloseDuringRead: Close from another goroutine (the
// block reader's stall watchdog) while a Read waits for a stalled body
// ends that Read, and races with nothing (go test -race).
func TestReadContentCloseDuringRead(t *testing.T) {
	c := someMember
	c.Size = 3 * tier.BlockSize
	block := make([]byte, tier.BlockSize)
	s := serveStalling(t, block, true) // every block: half, then nothing
	rc, err := s.ReadContent(context.Background(), c, 0, -1, false)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	if _, err := io.ReadFull(rc, buf); err != nil {
		t.Fatalf("first bytes: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, rc)
		done <- err
	}()
	rc.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a read of a closed reader ended without an error")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a Read waiting for a stalled body did not return after Close")
	}
}
