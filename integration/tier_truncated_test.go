package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// blockKey matches the cache key of block 2 of a member in an nginx cache
// file of the shipped configuration (proxy_cache_key $uri).
var blockKey = regexp.MustCompile(`\nKEY: /blocks/blake3/[0-9a-f]{64}/2\n`)

// TestTierTruncatedCacheFileHealed: a truncated cache file of the real
// nginx (a block cut short on the tier's disk, which nginx would serve for
// the cache's 365 days: it sends the cached length, then stalls at the
// file's end) is healed: a mount reads the block, verified, resuming past
// the tier's cache after one --stall-timeout, within its --read-timeout,
// and records no fetch_failed (issue 37, finding 6). Nothing failed
// verification, so there is no mismatch event either.
func TestTierTruncatedCacheFileHealed(t *testing.T) {
	f := newTierFixture(t)
	flags := []string{"--read-timeout", "30s", "--stall-timeout", "3s", "--readahead-max", "0"}
	dir, _ := f.mountTier(t, flags...)
	f.readAll(t, dir) // the tier caches every block

	var cached string
	filepath.Walk(f.nginxCache, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || cached != "" {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && blockKey.Match(b) {
			cached = p
		}
		return nil
	})
	if cached == "" {
		t.Fatalf("no cache file of block 2 of the big member under %s", f.nginxCache)
	}
	fi, err := os.Stat(cached)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(cached, fi.Size()-300_000); err != nil {
		t.Fatal(err)
	}

	dir, record := f.mountTier(t, flags...)
	want, _ := os.ReadFile(filepath.Join(f.src, "big"))
	start := time.Now()
	got, err := inMount(t, 60*time.Second, func() ([]byte, error) { return os.ReadFile(filepath.Join(dir, "big")) })
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read of the big member through a tier with a truncated cache file: %d bytes, %v", len(got), err)
	}
	t.Logf("read whole after %v (--read-timeout 30s)", time.Since(start).Round(time.Millisecond))
	rec, _ := os.ReadFile(record)
	if strings.Contains(string(rec), `"event":"fetch_failed"`) {
		t.Fatalf("a fetch_failed event in the run record:\n%s", rec)
	}
}
