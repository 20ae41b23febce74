package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/fusetest"
	"github.com/pinfs/pinfs/integration/tiertest"
)

// stallingTier is a tier in front of the origin at originAddr (HOST:PORT):
// it passes every request on, and every answer back, except that the body
// of an answer whose path starts with stall is cut after its first half
// and then held open, sending nothing, until the client goes away or the
// test ends. It returns the tier's URL.
func stallingTier(t *testing.T, originAddr, stall string) string {
	t.Helper()
	quit := make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://"+originAddr+r.URL.RequestURI(), nil)
		for _, h := range []string{"Range", "X-Pinfs-Bypass"} {
			if v := r.Header.Get(h); v != "" {
				req.Header.Set(h, v)
			}
		}
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(resp.StatusCode)
		if !strings.HasPrefix(r.URL.Path, "/"+stall) || resp.StatusCode != http.StatusOK {
			w.Write(body)
			return
		}
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-quit:
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() {
		close(quit)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String()
}

// TestMountThroughStallingTier: pinfs mount --foreground through a tier
// that stalls the body of the manifest, or of the member table, does not
// hang (issue 37, finding 5): without a fallback it exits 1 with the
// stall in its error, about --stall-timeout after the body stopped; with
// --fallback-store it mounts from the fallback (startMountEnv's 30 s
// bound) and serves the snapshot's bytes.
func TestMountThroughStallingTier(t *testing.T) {
	fusetest.Require(t)
	src := t.TempDir()
	want := make([]byte, 3<<20+77)
	rand.Read(want)
	os.WriteFile(filepath.Join(src, "data"), want, 0o644)
	os.WriteFile(filepath.Join(src, "small"), []byte("hello"), 0o644)
	st := t.TempDir()
	digest := mustPinfs(t, nil, "pin", src, "--store", st).lastLine()
	oaddr, _ := tiertest.Origin(t, pinfsBin, nil, "--store", st, "--cache-dir", t.TempDir())
	flags := []string{"--stall-timeout", "1s", "--read-timeout", "5s"}
	for _, stall := range []string{"manifests/", "members/"} {
		t.Run(strings.TrimSuffix(stall, "/"), func(t *testing.T) {
			tier := stallingTier(t, oaddr, stall)

			// Without a fallback: the mount fails, and says why.
			dir := t.TempDir()
			t.Cleanup(func() { fusetest.ForceUnmount(t, dir) })
			// 20 s: far beyond --stall-timeout 1s, short of the default 30 s,
			// so that a flag that does not act fails the test.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, pinfsBin, append([]string{"mount", digest, dir, "--store", tier,
				"--cache-dir", t.TempDir(), "--foreground"}, flags...)...)
			cmd.Env = noAWS()
			start := time.Now()
			r := runCmd(t, cmd)
			took := time.Since(start)
			if ctx.Err() != nil {
				t.Fatalf("pinfs mount through a tier that stalls the %s still running after 20 s: --stall-timeout 1s did not act", stall)
			}
			if r.code != 1 || !strings.Contains(r.stderr, "stall") {
				t.Fatalf("pinfs mount through a tier that stalls the %s: want exit 1 naming the stall, got %v", stall, r)
			}
			t.Logf("without a fallback: exit 1 after %v (--stall-timeout 1s)", took.Round(time.Millisecond))

			// With the origin's store as the fallback: it mounts and serves.
			dir = t.TempDir()
			start = time.Now()
			startMountEnv(t, noAWS(), dir, append([]string{digest, dir, "--store", tier, "--cache-dir", t.TempDir(),
				"--fallback-store", st}, flags...)...)
			t.Logf("with --fallback-store: serving after %v", time.Since(start).Round(time.Millisecond))
			got, err := inMount(t, 30*time.Second, func() ([]byte, error) { return os.ReadFile(filepath.Join(dir, "data")) })
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("read through the mount: %d bytes, %v; want the member", len(got), err)
			}
		})
	}
}
