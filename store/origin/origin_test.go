package origin

import (
	"bytes"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store/storetest"
	"github.com/pinfs/pinfs/store/tier"
	"github.com/pinfs/pinfs/verify/b3"
)

func TestBlocksServed(t *testing.T) {
	f := newFixture(t, Config{})
	for i, m := range f.ms {
		for k := int64(0); k*tier.BlockSize < m.Size; k++ {
			resp, body := get(t, f.block(i, k), "")
			end := min((k+1)*tier.BlockSize, m.Size)
			if resp.StatusCode != 200 || !bytes.Equal(body, f.data[i][k*tier.BlockSize:end]) {
				t.Fatalf("member %d block %d: %s, %d bytes", i, k, resp.Status, len(body))
			}
			if cc := resp.Header.Get("Cache-Control"); cc != tier.CacheControl || resp.Header.Get("ETag") == "" {
				t.Fatalf("block: Cache-Control %q, ETag %q", cc, resp.Header.Get("ETag"))
			}
		}
	}
	resp, body := get(t, f.block(0, 1), "bytes=10-19")
	if resp.StatusCode != 206 || !bytes.Equal(body, f.data[0][tier.BlockSize+10:tier.BlockSize+20]) {
		t.Fatalf("Range: %s %q", resp.Status, body)
	}
	_, metrics := get(t, f.url+"/"+tier.MetricsPath, "")
	if !bytes.Contains(metrics, []byte(`pinfs_origin_requests_total{code="206",kind="block"} 1`)) {
		t.Fatalf("the ranged answer is not counted as a 206:\n%s", metrics)
	}
}

// TestRefusals: what names no content of the store is refused, never
// cached, and a member whose stored bytes are bad is never served.
func TestRefusals(t *testing.T) {
	f := newFixture(t, Config{})
	d, _ := b3.Parse(f.ms[0].Digest)
	other := strings.Repeat("ab", 32)
	for url, code := range map[string]int{
		f.url + "/blocks/blake3/" + d.Hex() + "/0":                                        400, // no hint
		f.url + "/blocks/blake3/" + d.Hex() + "/0?snapshot=sha256:" + other + "&member=0": 404,
		f.block(0, 3): 404, // past the end
		strings.Replace(f.block(1, 0), "member=1", "member=0", 1): 404, // another digest at that ordinal
		strings.Replace(f.block(0, 0), "member=0", "member=7", 1): 404,
		f.url + "/runs/x/run.json":                                400,
		f.url + "/manifests/sha256/" + other:                      404,
	} {
		resp, _ := get(t, url, "")
		if resp.StatusCode != code || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: %s (Cache-Control %q), want %d no-store", url, resp.Status, resp.Header.Get("Cache-Control"), code)
		}
	}
	// Flip a byte of the small member in the store.
	var blob string
	filepath.WalkDir(f.dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, strings.TrimPrefix(f.ms[1].Digest, "blake3:")) {
			blob = p
		}
		return nil
	})
	b, err := os.ReadFile(blob)
	if err != nil {
		t.Fatalf("the small member's blob: %v", err)
	}
	b[100] ^= 1
	os.Chmod(blob, 0o600)
	if err := os.WriteFile(blob, b, 0o600); err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, f.block(1, 0), "")
	if resp.StatusCode == 200 || bytes.Equal(body, b) || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("a tampered member: %s (%d bytes, Cache-Control %q); want a refusal", resp.Status, len(body), resp.Header.Get("Cache-Control"))
	}
}

// TestQueueWait: a request finding MaxRequests in flight waits for a
// place, up to QueueWait, then gets 503; a place freed while it waits is
// its own.
func TestQueueWait(t *testing.T) {
	const wait = 300 * time.Millisecond
	f := newFixture(t, Config{MaxRequests: 1, QueueWait: wait})
	f.h.slots <- struct{}{} // one request in flight
	start := time.Now()
	resp, _ := get(t, f.block(1, 0), "")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("no place: %s, want 503 with Retry-After", resp.Status)
	}
	if took := time.Since(start); took < wait {
		t.Fatalf("503 after %v, want it after waiting QueueWait %v", took, wait)
	}

	// This time the place comes first: freed once the request waits.
	h := New(Config{Store: f.h.cfg.Store, Meta: f.h.cfg.Meta, Blocks: f.h.cfg.Blocks, MaxRequests: 1, QueueWait: time.Minute})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	h.slots <- struct{}{}
	type answer struct {
		resp *http.Response
		body []byte
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.Get(srv.URL + strings.TrimPrefix(f.block(1, 0), f.url))
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		got <- answer{resp, body, err}
	}()
	storetest.WaitParked(t, "origin.(*Handler).acquire", 1)
	<-h.slots
	select {
	case a := <-got:
		if a.err != nil || a.resp.StatusCode != 200 || !bytes.Equal(a.body, f.data[1]) {
			t.Fatalf("a place freed while waiting: %v %v, want the block", a.resp, a.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a place freed while waiting: no answer after 30 s")
	}
}
