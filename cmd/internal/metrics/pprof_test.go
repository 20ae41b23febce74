package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestPprofDurationIsCapped: a profile, trace or delta profile longer than
// maxProfileSeconds is refused with 400 at once; a short one is served.
func TestPprofDurationIsCapped(t *testing.T) {
	srv := httptest.NewServer(New(&fakeSource{}).Handler())
	t.Cleanup(srv.Close)
	// The client's timeout only keeps an uncapped handler from hanging the
	// test: a refusal comes back at once.
	client := &http.Client{Timeout: 10 * time.Second}
	status := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, p := range []string{
		"/debug/pprof/profile?seconds=100000",
		"/debug/pprof/trace?seconds=100000",
		"/debug/pprof/trace?seconds=60.5",
		"/debug/pprof/trace?seconds=NaN",
		"/debug/pprof/heap?seconds=100000",
		"/debug/pprof/allocs?seconds=1e9",
		"/debug/pprof/profile?seconds=61",
	} {
		if code, body := status(p); code != http.StatusBadRequest || !strings.Contains(body, "at most 60") {
			t.Errorf("GET %s: %d %q; want 400 naming the cap", p, code, body)
		}
	}
	if code, body := status("/debug/pprof/trace?seconds=0.01"); code != http.StatusOK {
		t.Errorf("a 10 ms trace: %d %q", code, body)
	}
}

// TestServerTimeouts: the metrics server bounds how long a client may take
// to send a request and how long an idle connection stays open, and gives
// a response long enough to carry the longest profile allowed.
func TestServerTimeouts(t *testing.T) {
	s := New(&fakeSource{}).server(t.Context())
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.IdleTimeout <= 0 || s.MaxHeaderBytes <= 0 {
		t.Errorf("server timeouts: header %v, read %v, idle %v, max header bytes %d",
			s.ReadHeaderTimeout, s.ReadTimeout, s.IdleTimeout, s.MaxHeaderBytes)
	}
	if s.WriteTimeout <= maxProfileSeconds*time.Second {
		t.Errorf("WriteTimeout %v does not exceed the longest profile, %d s", s.WriteTimeout, maxProfileSeconds)
	}
}
