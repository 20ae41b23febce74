package httpstore

import (
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
)

// serve returns a Store in front of handler h.
func serve(t *testing.T, h http.HandlerFunc) *Store {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var someMember = store.Content{Digest: "blake3:" + strings.Repeat("a", 64), Snapshot: "sha256:" + strings.Repeat("b", 64)}

// TestReadContentInParallel: the blocks of a long range are requested
// several at once, never more than Ahead, and come back in order.
func TestReadContentInParallel(t *testing.T) {
	const nblocks = 20
	var inFlight, most atomic.Int32
	s := serve(t, func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond) // a cold tier's round trip
		i, _ := strconv.Atoi(r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:])
		w.Header().Set("Content-Length", strconv.Itoa(tier.BlockSize))
		w.Write([]byte(strings.Repeat(string(rune('a'+i)), tier.BlockSize)))
	})
	c := someMember
	c.Size = nblocks * tier.BlockSize
	start := time.Now()
	rc, err := s.ReadContent(context.Background(), c, 0, -1, false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || len(got) != nblocks*tier.BlockSize {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	for i := range nblocks {
		if got[i*tier.BlockSize] != byte('a'+i) {
			t.Fatalf("block %d holds block %c's bytes", i, got[i*tier.BlockSize])
		}
	}
	if m := most.Load(); m < 2 || m > Ahead {
		t.Fatalf("%d requests in flight at most, want 2..%d", m, Ahead)
	}
	t.Logf("%d blocks in %v, %d in flight at most", nblocks, time.Since(start).Round(time.Millisecond), most.Load())
}

// TestReadContentBadAnswers: what a tier may answer wrong maps to the
// store's errors, and a body cut short is never a clean end.
func TestReadContentBadAnswers(t *testing.T) {
	c := someMember
	c.Size = 2 * tier.BlockSize
	for _, tc := range []struct {
		name    string
		h       http.HandlerFunc
		off, n  int64
		want    error // of ReadContent or the read
		wantNot error
	}{
		{name: "404", h: func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, n: -1, want: store.ErrNotFound},
		{name: "503", h: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }, n: -1, want: store.ErrThrottled},
		{name: "500", h: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }, n: -1, wantNot: store.ErrNotFound},
		{name: "cut body", h: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(tier.BlockSize))
			w.Write(make([]byte, 1000))
		}, n: -1, want: io.ErrUnexpectedEOF},
		{name: "range ignored", h: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200) // the whole block for a Range
			w.Write(make([]byte, tier.BlockSize))
		}, off: 10, n: 5, want: store.ErrBadResponse},
		{name: "wrong Content-Range", h: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Range", "bytes 0-4/"+strconv.Itoa(tier.BlockSize))
			w.Header().Set("Content-Length", "5")
			w.WriteHeader(206)
			w.Write(make([]byte, 5))
		}, off: 10, n: 5, want: store.ErrBadResponse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t, tc.h)
			rc, err := s.ReadContent(context.Background(), c, tc.off, tc.n, false)
			if err == nil {
				_, err = io.ReadAll(rc)
				rc.Close()
			}
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) || tc.wantNot != nil && errors.Is(err, tc.wantNot) {
				t.Fatalf("err = %v, want %v (not %v)", err, tc.want, tc.wantNot)
			}
		})
	}
}

// TestGetTwiceBad: a metadata blob that fails its digest from the tier
// and again bypassing it is an error wrapping b3.ErrMismatch, after
// exactly two requests, the second with the bypass header.
func TestGetTwiceBad(t *testing.T) {
	var reqs, bypassed atomic.Int32
	s := serve(t, func(w http.ResponseWriter, r *http.Request) {
		reqs.Add(1)
		if r.Header.Get(tier.BypassHeader) == "1" {
			bypassed.Add(1)
		}
		io.WriteString(w, "not the table")
	})
	_, err := s.Get(context.Background(), "members/sha256/"+strings.Repeat("c", 64))
	if !errors.Is(err, b3.ErrMismatch) || reqs.Load() != 2 || bypassed.Load() != 1 {
		t.Fatalf("Get = %v after %d requests (%d bypassing); want a mismatch after 2 (1)", err, reqs.Load(), bypassed.Load())
	}
}
