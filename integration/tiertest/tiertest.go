// Package tiertest runs a cluster's cache tier for the tests and the
// bench: a pinfs origin (pinfs serve) and a real nginx (Debian's
// nginx-light) in front of it, from the shipped configuration
// deploy/nginx/pinfs-tier.conf with only its three "pinfs:" lines
// rewritten: the listen address, the origin and the cache dir.
package tiertest

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/repo"
)

// Origin starts `bin serve --listen ADDR` with args (--store, --cache-dir,
// ...) and env (nil: this process's) and waits for its readiness; it
// returns ADDR and the process. t.Cleanup kills it.
func Origin(t testing.TB, bin string, env []string, args ...string) (string, *exec.Cmd) {
	t.Helper()
	addr := FreeAddr(t)
	srv := exec.Command(bin, append([]string{"serve", "--listen", addr}, args...)...)
	srv.Env = env
	var out bytes.Buffer
	srv.Stdout, srv.Stderr = &out, &out
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { srv.Wait(); close(exited) }()
	t.Cleanup(func() {
		srv.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("pinfs serve:\n%s", out.String())
		}
	})
	WaitHTTP(t, "http://"+addr+"/-/ready")
	return addr, srv
}

// Tier is a running nginx.
type Tier struct {
	URL   string // http://127.0.0.1:PORT
	Cache string // its proxy_cache_path
	Pid   int

	stop sync.Once
	cmd  *exec.Cmd
}

// Nginx runs nginx in front of the origin at originAddr (HOST:PORT) with
// a new cache dir, and waits (at most 10 s) until it answers (the tier
// answers /-/ itself, with 404, without asking the origin); t.Cleanup
// stops it (and logs nginx's output if the test failed). Without nginx
// the test is skipped, or fails when CI=true.
func Nginx(t testing.TB, originAddr string) *Tier {
	t.Helper()
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("nginx not installed (apt-get install nginx-light)")
		}
		t.Skip("nginx not installed (apt-get install nginx-light)")
	}
	conf, err := os.ReadFile(filepath.Join(repo.MustRoot(t), "deploy/nginx/pinfs-tier.conf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addr := FreeAddr(t)
	tr := &Tier{URL: "http://" + addr, Cache: filepath.Join(dir, "cache")}
	c := string(conf)
	for from, to := range map[string]string{"listen 8080;": "listen " + addr + ";",
		"server pinfs-origin:8081;": "server " + originAddr + ";", "/var/cache/pinfs-tier": tr.Cache} {
		if !strings.Contains(c, from) {
			t.Fatalf("deploy/nginx/pinfs-tier.conf lacks %q", from)
		}
		c = strings.ReplaceAll(c, from, to)
	}
	cp := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cp, []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
	tr.cmd = exec.Command(nginx, "-e", filepath.Join(dir, "error.log"), "-c", cp, "-g",
		"daemon off; master_process off; pid "+filepath.Join(dir, "pid")+"; user root;")
	var out bytes.Buffer
	tr.cmd.Stdout, tr.cmd.Stderr = &out, &out
	tr.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := tr.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tr.Pid = tr.cmd.Process.Pid
	t.Cleanup(func() {
		tr.Stop()
		if t.Failed() {
			elog, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx:\n%s%s", out.String(), elog)
		}
	})
	wait(t, tr.URL+"/-/ready", http.StatusNotFound)
	return tr
}

// Stop kills nginx and waits for it; it may be called more than once.
func (tr *Tier) Stop() {
	tr.stop.Do(func() { tr.cmd.Process.Kill(); tr.cmd.Wait() })
}

// WaitHTTP waits (at most 10 s) for url to answer 200.
func WaitHTTP(t testing.TB, url string) {
	t.Helper()
	wait(t, url, http.StatusOK)
}

func wait(t testing.TB, url string, code int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == code {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %d within 10 s: %v", url, code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FreeAddr returns 127.0.0.1:PORT for a port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
