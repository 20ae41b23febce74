package integration

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/repo"
)

// tierFixture is a snapshot in a local store served by pinfs serve behind
// a real nginx run from the shipped deploy/nginx/pinfs-tier.conf.
type tierFixture struct {
	src, digest     string
	store           string // the origin's store (a directory)
	stopTier        func() // kills nginx
	origin, tierURL string // http://127.0.0.1:PORT
	nginxCache      string
}

func newTierFixture(t *testing.T) *tierFixture {
	t.Helper()
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("nginx not installed (apt-get install nginx-light)")
		}
		t.Skip("nginx not installed (apt-get install nginx-light)")
	}
	f := &tierFixture{src: t.TempDir()}
	big := make([]byte, 5<<20+12345)
	rand.Read(big)
	os.WriteFile(filepath.Join(f.src, "big"), big, 0o644)
	os.Mkdir(filepath.Join(f.src, "small"), 0o755)
	for i := range 20 {
		b := make([]byte, 1000+i*3000)
		rand.Read(b)
		os.WriteFile(filepath.Join(f.src, "small", strconv.Itoa(i)), b, 0o644)
	}
	st := t.TempDir()
	f.store = st
	f.digest = mustPinfs(t, nil, "pin", f.src, "--store", st).lastLine()

	oaddr := freeAddr(t)
	f.origin = "http://" + oaddr
	srv := exec.Command(pinfsBin, "serve", "--store", st, "--listen", oaddr, "--cache-dir", t.TempDir())
	srv.Stdout, srv.Stderr = io.Discard, io.Discard
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	waitHTTP(t, f.origin+"/-/ready")

	conf, err := os.ReadFile(filepath.Join(repo.MustRoot(t), "deploy/nginx/pinfs-tier.conf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f.nginxCache = filepath.Join(dir, "cache")
	taddr := freeAddr(t)
	f.tierURL = "http://" + taddr
	c := string(conf)
	for from, to := range map[string]string{"listen 8080;": "listen " + taddr + ";",
		"server pinfs-origin:8081;": "server " + oaddr + ";", "/var/cache/pinfs-tier": f.nginxCache} {
		if !strings.Contains(c, from) {
			t.Fatalf("deploy/nginx/pinfs-tier.conf lacks %q", from)
		}
		c = strings.ReplaceAll(c, from, to)
	}
	cp := filepath.Join(dir, "nginx.conf")
	os.WriteFile(cp, []byte(c), 0o644)
	ng := exec.Command(nginx, "-e", filepath.Join(dir, "error.log"), "-c", cp, "-g",
		"daemon off; master_process off; pid "+filepath.Join(dir, "pid")+"; user root;")
	var nlog bytes.Buffer
	ng.Stdout, ng.Stderr = &nlog, &nlog
	ng.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := ng.Start(); err != nil {
		t.Fatal(err)
	}
	var stop sync.Once
	f.stopTier = func() { stop.Do(func() { ng.Process.Kill(); ng.Wait() }) }
	t.Cleanup(func() {
		f.stopTier()
		if t.Failed() {
			t.Logf("nginx:\n%s", nlog.String())
		}
	})
	waitHTTP(t, f.tierURL+"/manifests/sha256/"+strings.TrimPrefix(f.digest, "sha256:"))
	return f
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitHTTP waits (at most 10 s) for url to answer 200.
func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no 200 within 10 s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// noAWS is the environment of a mount through the tier: no credentials,
// no endpoint, and a proxy that is not there, so that a request to
// anything but the tier would fail.
func noAWS() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "PINFS_STORE=") {
			env = append(env, kv)
		}
	}
	return append(env, "HTTP_PROXY=http://127.0.0.1:1", "HTTPS_PROXY=http://127.0.0.1:1")
}

// mountTier mounts the fixture through the tier with a fresh cache dir,
// without credentials, and returns the mountpoint and the run record.
// Further flags go to the mount.
func (f *tierFixture) mountTier(t *testing.T, flags ...string) (string, string) {
	dir, cache := t.TempDir(), t.TempDir()
	startMountEnv(t, noAWS(), dir, append([]string{f.digest, dir, "--store", f.tierURL, "--cache-dir", cache}, flags...)...)
	return dir, filepath.Join(cache, "runs.jsonl")
}

// readAll reads every file of the mount and compares it with the source.
func (f *tierFixture) readAll(t *testing.T, dir string) {
	t.Helper()
	err := filepath.Walk(f.src, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(f.src, p)
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%s: bytes differ from the source", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

var blockCount = regexp.MustCompile(`pinfs_origin_requests_total\{code="200",kind="block"\} (\d+)`)

// originBlocks returns how many blocks the origin has answered.
func (f *tierFixture) originBlocks(t *testing.T) int {
	t.Helper()
	resp, err := http.Get(f.origin + "/-/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := blockCount.FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
