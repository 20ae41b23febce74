package origin

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
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
