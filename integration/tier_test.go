package integration

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/integration/tiertest"
)

// tierFixture is a snapshot in a local store served by pinfs serve behind
// a real nginx run from the shipped deploy/nginx/pinfs-tier.conf
// (integration/nginxtest).
type tierFixture struct {
	src, digest     string
	store           string // the origin's store (a directory)
	stopTier        func() // kills nginx
	origin, tierURL string // http://127.0.0.1:PORT
	nginxCache      string
}

func newTierFixture(t *testing.T) *tierFixture {
	t.Helper()
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

	oaddr, _ := tiertest.Origin(t, pinfsBin, nil, "--store", st, "--cache-dir", t.TempDir())
	f.origin = "http://" + oaddr
	tr := tiertest.Nginx(t, oaddr)
	f.tierURL, f.nginxCache, f.stopTier = tr.URL, tr.Cache, tr.Stop
	tiertest.WaitHTTP(t, f.tierURL+"/manifests/sha256/"+strings.TrimPrefix(f.digest, "sha256:"))
	return f
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
