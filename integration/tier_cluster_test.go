package integration

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTierFourNodesFetchOnce: four mounts with their own cache dirs (four
// nodes) read the whole snapshot through one nginx, without credentials;
// the origin answers each block once, for the first node only.
func TestTierFourNodesFetchOnce(t *testing.T) {
	f := newTierFixture(t)
	dir, _ := f.mountTier(t)
	f.readAll(t, dir)
	one := f.originBlocks(t)
	if one == 0 {
		t.Fatal("the first node's reads reached no block at the origin")
	}
	for range 3 {
		dir, _ := f.mountTier(t)
		f.readAll(t, dir)
	}
	if four := f.originBlocks(t); float64(four) > 1.05*float64(one) {
		t.Fatalf("four nodes made %d block requests at the origin, one node %d: want at most 1.05 x", four, one)
	} else {
		t.Logf("origin block requests: one node %d, four nodes %d", one, four)
	}
}

// TestTierTamperedCopy: a block that nginx's cache holds with a flipped
// byte is served right, reported once as a mismatch from the tier, and
// replaced in the cache.
func TestTierTamperedCopy(t *testing.T) {
	f := newTierFixture(t)
	dir, _ := f.mountTier(t)
	f.readAll(t, dir)

	var file, url string
	filepath.Walk(f.nginxCache, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || file != "" {
			return err
		}
		b, _ := os.ReadFile(p)
		if i := bytes.Index(b, []byte("KEY: /blocks/blake3/")); i >= 0 && len(b) > 1<<20 {
			file = p
			url = string(b[i+5 : i+bytes.IndexByte(b[i:], '\n')])
		}
		return nil
	})
	if file == "" {
		t.Fatal("no full block in nginx's cache")
	}
	b, _ := os.ReadFile(file)
	good := b[len(b)-100]
	b[len(b)-100] ^= 0x40
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}

	dir, record := f.mountTier(t)
	f.readAll(t, dir)
	rec, _ := os.ReadFile(record)
	var ms []string
	for _, l := range strings.Split(string(rec), "\n") {
		if strings.Contains(l, `"event":"mismatch"`) {
			ms = append(ms, l)
		}
	}
	if len(ms) != 1 || !strings.Contains(ms[0], `"from":"tier"`) {
		t.Fatalf("want one mismatch event from the tier, got %d:\n%s", len(ms), strings.Join(ms, "\n"))
	}
	// The cache holds the good copy again: served from the cache without
	// the bypass header, the byte is back.
	q := "?snapshot=" + f.digest + "&member=0"
	resp, err := http.Get(f.tierURL + url + q)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("X-Cache-Status") != "HIT" || len(body) < 100 || body[len(body)-100] != good {
		t.Fatalf("the tier still serves the flipped copy (cache %s)", resp.Header.Get("X-Cache-Status"))
	}
}

// TestTierRefusals: the origin refuses a URL that names no content (400),
// answers 404 for a digest its store lacks, and a mount of such a digest
// through the tier fails with one line.
func TestTierRefusals(t *testing.T) {
	f := newTierFixture(t)
	unknown := strings.Repeat("ab", 32)
	for path, code := range map[string]int{
		"/gates/x/head":                    400,
		"/runs/x/run.json":                 400,
		"/cas/blake3/" + unknown:           400,
		"/manifests/sha256/" + unknown:     404,
		"/blocks/blake3/" + unknown + "/0": 400, // no hint
		"/blocks/blake3/" + unknown + "/0?snapshot=sha256:" + unknown + "&member=0": 404,
	} {
		resp, err := http.Get(f.origin + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != code || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: %d (Cache-Control %q), want %d no-store", path, resp.StatusCode, resp.Header.Get("Cache-Control"), code)
		}
	}
	resp, err := http.Post(f.origin+"/manifests/sha256/"+strings.TrimPrefix(f.digest, "sha256:"), "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("POST: %d, want 405", resp.StatusCode)
	}
	wantExit(t, nil, 2, []string{"--no-head"}, "verify", f.digest, "--store", f.tierURL)
	wantExit(t, nil, 0, []string{"OK"}, "verify", f.digest, "--store", f.tierURL, "--no-head", "--cache-dir", "")
	r := pinfs(t, nil, "mount", "sha256:"+unknown, t.TempDir(), "--store", f.tierURL, "--cache-dir", t.TempDir())
	if r.code != 1 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, unknown) {
		t.Fatalf("mount of an unknown digest through the tier: want exit 1 and one line naming it, got %v", r)
	}
}
