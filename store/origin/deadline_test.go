package origin

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store/localstore"
)

// runOrigin runs Run over a new local store with o's deadlines and returns the store's dir and the
// origin's address; the origin stops with the test.
func runOrigin(t *testing.T, o Options) (dir, addr string) {
	t.Helper()
	dir = t.TempDir()
	st, err := localstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	o.Store, o.Listen, o.CacheDir = st, "127.0.0.1:0", t.TempDir()
	o.Ready = func(a string) { ready <- a }
	go func() { done <- Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("Run did not return 15 s after its context ended")
		}
	})
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the origin did not listen within 10 s")
	}
	return dir, addr
}

// dialSmall connects to addr with a small receive buffer, so that an
// answer that is not read fills it soon.
func dialSmall(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitInFlight waits (at most 10 s) until the origin at addr answers n
// requests, by its metrics.
func waitInFlight(t *testing.T, addr string, n string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/-/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), "\npinfs_origin_requests_in_flight "+n+"\n") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not %s requests in flight within 10 s", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStalledReaderFreesItsPlace: a client that asks for a large member
// table and never reads it holds the origin's only place for at most
// WriteTimeout: a request waiting for that place is then answered.
func TestStalledReaderFreesItsPlace(t *testing.T) {
	dir, addr := runOrigin(t, Options{MaxRequests: 1, WriteTimeout: 300 * time.Millisecond})
	key, _ := plantTable(t, dir, 24<<20)
	stalled := dialSmall(t, addr)
	io.WriteString(stalled, "GET /"+key+" HTTP/1.1\r\nHost: origin\r\n\r\n")
	waitInFlight(t, addr, "1")
	// The default queue wait is 10 s: without a write deadline the place
	// is never freed and this gets 503.
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Get("http://" + addr + "/manifests/sha256/" + strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a request behind a stalled client: %s, want 404 (its place freed)", resp.Status)
	}
	// The stalled connection was closed short of the table.
	stalled.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, stalled)
	if err == nil && n >= 24<<20 || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the stalled client's connection: %d bytes, %v; want it cut short", n, err)
	}
}

// TestIdleAndSlowConnectionsClosed: a keep-alive connection left idle
// after an answer is closed after IdleTimeout, and one that never
// finishes its request after RequestTimeout.
func TestIdleAndSlowConnectionsClosed(t *testing.T) {
	_, addr := runOrigin(t, Options{IdleTimeout: 300 * time.Millisecond, RequestTimeout: 300 * time.Millisecond})
	idle := dialSmall(t, addr)
	io.WriteString(idle, "GET /-/ready HTTP/1.1\r\nHost: origin\r\n\r\n")
	br := bufio.NewReader(idle)
	idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		t.Fatal("the origin did not keep the connection alive")
	}
	slow := dialSmall(t, addr)
	io.WriteString(slow, "GET /-/ready HTTP/1.1\r\nHost: ori")
	slow.SetReadDeadline(time.Now().Add(10 * time.Second))
	for name, r := range map[string]io.Reader{"idle": br, "slow": slow} {
		if _, err := io.Copy(io.Discard, r); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("the %s connection is still open after 10 s", name)
		}
	}
}
