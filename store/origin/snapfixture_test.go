package origin

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/store/metacache"
	"github.com/pinfs/pinfs/store/tier"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// snapFixture is an origin over a local store holding n snapshots, each
// of an empty member (0) and a small one (1) of a path of its own, so
// that every snapshot has a table of its own.
type snapFixture struct {
	url, metaDir string
	h            *Handler
	snaps        []verify.Digest
	ms           [][]verify.Member
	st           *openCounter
	log          *syncBuffer
}

// newSnapFixture builds the fixture; wrap, if set, wraps the Getter the
// origin loads snapshots from. A gate it makes is released when the
// test ends, before the server closes.
func newSnapFixture(t *testing.T, n int, cfg Config, wrap func(verify.Getter) verify.Getter) *snapFixture {
	t.Helper()
	ctx := context.Background()
	ls, err := localstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &snapFixture{metaDir: filepath.Join(t.TempDir(), "meta"), st: &openCounter{Store: ls}, log: &syncBuffer{}}
	small := make([]byte, 3000)
	rand.Read(small)
	sum := b3.Of(small)
	if _, err := ls.PutCAS(ctx, sum.String(), bytes.NewReader(small), int64(len(small))); err != nil {
		t.Fatal(err)
	}
	empty := b3.Of(nil)
	if _, err := ls.PutCAS(ctx, empty.String(), bytes.NewReader(nil), 0); err != nil {
		t.Fatal(err)
	}
	for k := range n {
		ms := []verify.Member{
			{ID: "a/empty", Path: "a/empty", Size: 0, Digest: empty.String(), CAS: empty.String()},
			{ID: fmt.Sprintf("b/%d", k), Path: fmt.Sprintf("b/%d", k), Size: int64(len(small)), Digest: sum.String(), CAS: sum.String()},
		}
		d, _, _, err := verifytest.PutSnapshot(ctx, ls, ms, verify.Manifest{})
		if err != nil {
			t.Fatal(err)
		}
		f.snaps, f.ms = append(f.snaps, d), append(f.ms, ms)
	}
	var meta verify.Getter = metacache.New(f.metaDir, ls)
	br, err := blocks.New(blocks.Config{Objects: ls, Outboards: meta.(*metacache.Cache), MemBytes: 16 << 20,
		ReadaheadMax: -1, ReadTimeout: 5 * time.Second, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { br.Close() })
	if wrap != nil {
		meta = wrap(meta)
	}
	cfg.Store, cfg.Meta, cfg.Blocks = f.st, meta, br
	cfg.Log = slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelError}))
	f.h = New(cfg)
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	if g, ok := meta.(*gate); ok {
		t.Cleanup(g.release)
	}
	return f
}

// block returns the URL of block k of member i of snapshot s, under the
// digest hexd ("" for the member's own).
func (f *snapFixture) block(s, i int, k int64, hexd string) string {
	if hexd == "" {
		d, _ := b3.Parse(f.ms[s][i].Digest)
		hexd = d.Hex()
	}
	b := tier.Block{Hex: hexd, Index: k, Snapshot: string(f.snaps[s]), Member: i}
	return f.url + "/" + b.Path() + "?" + b.Query()
}

// madeUp returns a digest no member has.
func madeUp() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// openCounter counts the manifests opened in its store.
type openCounter struct {
	store.Store
	mu    sync.Mutex
	opens int
}

func (c *openCounter) Open(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	if strings.HasPrefix(key, "manifests/") {
		c.mu.Lock()
		c.opens++
		c.mu.Unlock()
	}
	return c.Store.(opener).Open(ctx, key)
}

func (c *openCounter) manifestOpens() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opens
}

// gate is a Getter whose manifest reads (the start of every load) wait
// for open to be closed, or for their context to end, counting them.
type gate struct {
	verify.Getter
	open     chan struct{}
	once     sync.Once
	canceled chan struct{} // a send per manifest read ended by its context

	mu             sync.Mutex
	in, max, reads int
}

func newGate(g verify.Getter) *gate {
	return &gate{Getter: g, open: make(chan struct{}), canceled: make(chan struct{}, 64)}
}

func (g *gate) Get(ctx context.Context, key string) ([]byte, error) {
	if strings.HasPrefix(key, "manifests/") {
		g.mu.Lock()
		g.in++
		g.reads++
		g.max = max(g.max, g.in)
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			g.in--
			g.mu.Unlock()
		}()
		select {
		case <-g.open:
		case <-ctx.Done():
			g.canceled <- struct{}{}
			return nil, ctx.Err()
		}
	}
	return g.Getter.Get(ctx, key)
}

// release lets every manifest read go on.
func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

func (g *gate) counts() (in, most, reads int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.in, g.max, g.reads
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// eventually polls cond every millisecond for at most 10 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
