package origin

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/store/metacache"
	"github.com/pinfs/pinfs/store/tier"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// fixture is an origin over a local store holding one snapshot of a
// three-block member and a small one.
type fixture struct {
	url, dir string
	snap     verify.Digest
	ms       []verify.Member
	data     [][]byte
	h        *Handler
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{dir: t.TempDir()}
	st, err := localstore.New(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, size := range []int{2*tier.BlockSize + 5000, 3000} {
		b := make([]byte, size)
		rand.Read(b)
		sum, ob, err := b3.Encode(bytes.NewReader(b), int64(size))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutCAS(ctx, sum.String(), bytes.NewReader(b), int64(size)); err != nil {
			t.Fatal(err)
		}
		if size > b3.GroupSize {
			if err := st.Put(ctx, verify.OutboardKey(sum.Hex()), ob); err != nil {
				t.Fatal(err)
			}
		}
		p := []string{"a/big", "b/small"}[i]
		f.ms = append(f.ms, verify.Member{ID: p, Path: p, Size: int64(size), Digest: sum.String(), CAS: sum.String()})
		f.data = append(f.data, b)
	}
	if f.snap, _, _, err = verifytest.PutSnapshot(ctx, st, f.ms, verify.Manifest{}); err != nil {
		t.Fatal(err)
	}
	meta := metacache.New(filepath.Join(t.TempDir(), "meta"), st)
	br, err := blocks.New(blocks.Config{Objects: st, Outboards: meta, MemBytes: 64 << 20, ReadaheadMax: -1,
		ReadTimeout: 5 * time.Second, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { br.Close() })
	cfg.Store, cfg.Meta, cfg.Blocks = st, meta, br
	f.h = New(cfg)
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// block returns the URL of block k of member i.
func (f *fixture) block(i int, k int64) string {
	d, _ := b3.Parse(f.ms[i].Digest)
	b := tier.Block{Hex: d.Hex(), Index: k, Snapshot: string(f.snap), Member: i}
	return f.url + "/" + b.Path() + "?" + b.Query()
}

func get(t *testing.T, url, rng string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b
}

// TestBlocksServed: every block is its member's bytes, cacheable for
// good, with an ETag from the digest; a Range gets 206 and is counted so.
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
// place, up to QueueWait, then gets 503.
func TestQueueWait(t *testing.T) {
	f := newFixture(t, Config{MaxRequests: 1, QueueWait: 300 * time.Millisecond})
	f.h.slots <- struct{}{} // one request in flight
	resp, _ := get(t, f.block(1, 0), "")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("no place: %s, want 503 with Retry-After", resp.Status)
	}
	time.AfterFunc(100*time.Millisecond, func() { <-f.h.slots })
	if resp, body := get(t, f.block(1, 0), ""); resp.StatusCode != 200 || !bytes.Equal(body, f.data[1]) {
		t.Fatalf("a place freed while waiting: %s, want the block", resp.Status)
	}
}
