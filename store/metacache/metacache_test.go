package metacache

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/cache/cachetest"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// remote is an in-memory store.Blobs that counts Gets and can go away.
type remote struct {
	blobs map[string][]byte
	gets  int
	down  bool
}

func (r *remote) Get(_ context.Context, key string) ([]byte, error) {
	r.gets++
	if r.down {
		return nil, errors.New("connection refused")
	}
	b, ok := r.blobs[key]
	if !ok {
		return nil, store.ErrNotFound
	}
	return b, nil
}

func (r *remote) Put(_ context.Context, key string, b []byte) error {
	r.blobs[key] = b
	return nil
}

func TestGetIsReadThroughAndSurvivesAnOutage(t *testing.T) {
	ctx := context.Background()
	manifest := []byte("{\"path\":\"a\"}\n")
	key := verify.MembersKey(verify.SHA256(manifest))
	r := &remote{blobs: map[string][]byte{key: manifest}}
	c := New(t.TempDir(), r)
	for range 2 {
		b, err := c.Get(ctx, key)
		if err != nil || !bytes.Equal(b, manifest) {
			t.Fatalf("Get = %q, %v", b, err)
		}
	}
	if r.gets != 1 {
		t.Errorf("%d remote gets, want 1 (second from the cache)", r.gets)
	}
	r.down = true
	if b, err := c.Get(ctx, key); err != nil || !bytes.Equal(b, manifest) {
		t.Fatalf("Get with the store down = %q, %v", b, err)
	}
	if _, err := c.Get(ctx, verify.MembersKey(verify.SHA256([]byte("other")))); err == nil {
		t.Fatal("Get of an uncached key with the store down succeeded")
	}
}

func TestBadLocalCopyIsReplacedAndBadRemoteRefused(t *testing.T) {
	ctx := context.Background()
	manifest := []byte("{\"path\":\"a\"}\n")
	key := verify.MembersKey(verify.SHA256(manifest))
	r := &remote{blobs: map[string][]byte{key: manifest}}
	dir := t.TempDir()
	c := New(dir, r)
	if _, err := c.Get(ctx, key); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, filepath.FromSlash(key))
	if err := os.WriteFile(p, []byte(`{"a":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := c.Get(ctx, key); err != nil || !bytes.Equal(b, manifest) {
		t.Fatalf("Get over a corrupted copy = %q, %v", b, err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, manifest) {
		t.Errorf("corrupted copy not replaced: %q", b)
	}
	r.blobs[key] = []byte("tampered")
	os.Remove(p)
	if _, err := c.Get(ctx, key); !errors.Is(err, verify.ErrInvalid) {
		t.Fatalf("tampered remote blob: %v", err)
	}
}

func TestOutboard(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("x"), 3*b3.GroupSize+5)
	sum, ob, err := b3.Encode(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	key := verify.OutboardKey(sum.Hex())
	r := &remote{blobs: map[string][]byte{key: ob}}
	c := New(t.TempDir(), r)
	got, err := c.Outboard(ctx, sum, int64(len(data)), false)
	if err != nil || b3.Verify(sum, got, int64(len(data)), 0, data) != nil {
		t.Fatalf("Outboard = %d bytes, %v", len(got), err)
	}
	// A bad local copy is replaced when the caller asks for a fresh one.
	bad := bytes.Clone(ob)
	bad[20] ^= 1
	c.keep(key, bad)
	got, _ = c.Outboard(ctx, sum, int64(len(data)), false)
	if b3.Verify(sum, got, int64(len(data)), 0, data) == nil {
		t.Fatal("test setup: the corrupted outboard verifies")
	}
	got, err = c.Outboard(ctx, sum, int64(len(data)), true)
	if err != nil || b3.Verify(sum, got, int64(len(data)), 0, data) != nil {
		t.Fatalf("fresh Outboard = %v", err)
	}
	if got, _ = c.Outboard(ctx, sum, int64(len(data)), false); b3.Verify(sum, got, int64(len(data)), 0, data) != nil {
		t.Fatal("fresh outboard did not replace the bad local copy")
	}
	// Small members need no stored outboard.
	small := []byte("small")
	ob, err = c.Outboard(ctx, b3.Of(small), int64(len(small)), false)
	if err != nil || b3.Verify(b3.Of(small), ob, int64(len(small)), 0, small) != nil {
		t.Fatalf("small outboard: %v", err)
	}
}

// An outboard of the wrong size in the store, longer as well as shorter,
// is a mismatch (which the block reader does not retry), not a read that
// may pass.
func TestOutboardOfTheWrongSizeIsAMismatch(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("x"), 3*b3.GroupSize+5)
	sum, ob, err := b3.Encode(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	key := verify.OutboardKey(sum.Hex())
	for name, stored := range map[string][]byte{"longer": append(bytes.Clone(ob), 0), "shorter": ob[:len(ob)-1]} {
		c := New(t.TempDir(), &remote{blobs: map[string][]byte{key: stored}})
		if _, err := c.Outboard(ctx, sum, int64(len(data)), false); !errors.Is(err, b3.ErrMismatch) {
			t.Errorf("%s outboard: %v; want an error wrapping b3.ErrMismatch", name, err)
		}
	}
}

func TestManifestsAreCheckedByTheDigestRule(t *testing.T) {
	ctx := context.Background()
	m := &verify.Manifest{Purpose: "p", Members: verify.MembersRef{URI: verify.MembersURI(verify.SHA256(nil))}}
	good, err := verify.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	key := verify.ManifestKey(m.SnapshotID)
	r := &remote{blobs: map[string][]byte{key: good}}
	dir := t.TempDir()
	c := New(dir, r)
	if b, err := c.Get(ctx, key); err != nil || !bytes.Equal(b, good) {
		t.Fatalf("Get = %q, %v", b, err)
	}
	bad := bytes.Replace(good, []byte(`"p"`), []byte(`"q"`), 1)
	os.WriteFile(filepath.Join(dir, filepath.FromSlash(key)), bad, 0o644)
	if b, err := c.Get(ctx, key); err != nil || !bytes.Equal(b, good) {
		t.Fatalf("Get over a tampered local manifest = %q, %v", b, err)
	}
	r.blobs[key] = bad
	os.Remove(filepath.Join(dir, filepath.FromSlash(key)))
	if _, err := c.Get(ctx, key); !errors.Is(err, verify.ErrInvalid) {
		t.Fatalf("tampered remote manifest: %v", err)
	}
}

// outboardFixture returns a member of three verification groups and a
// remote holding its outboard.
func outboardFixture(t *testing.T) ([]byte, b3.Sum, *remote) {
	t.Helper()
	data := bytes.Repeat([]byte("y"), 3*b3.GroupSize+5)
	sum, ob, err := b3.Encode(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return data, sum, &remote{blobs: map[string][]byte{verify.OutboardKey(sum.Hex()): ob}}
}

// A cache dir that cannot be written does not make reads fail: the
// store's verified bytes are served, as if there were no cache.
func TestUnwritableDirServesFromTheStore(t *testing.T) {
	ctx := context.Background()
	manifest := []byte("{\"path\":\"a\"}\n")
	mkey := verify.MembersKey(verify.SHA256(manifest))
	for name, dir := range map[string]func(t *testing.T) string{
		"read-only": func(t *testing.T) string {
			d := t.TempDir()
			cachetest.ReadOnly(t, d)
			return d
		},
		"read-only, not created yet": func(t *testing.T) string {
			d := t.TempDir()
			cachetest.ReadOnly(t, d)
			return filepath.Join(d, "meta")
		},
		"full": func(t *testing.T) string { return cachetest.FullDir(t) },
	} {
		t.Run(name, func(t *testing.T) {
			data, sum, r := outboardFixture(t)
			r.blobs[mkey] = manifest
			var buf bytes.Buffer
			c := New(dir(t), r, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
			for range 2 {
				ob, err := c.Outboard(ctx, sum, int64(len(data)), false)
				if err != nil || b3.Verify(sum, ob, int64(len(data)), 0, data) != nil {
					t.Fatalf("Outboard = %d bytes, %v", len(ob), err)
				}
				if b, err := c.Get(ctx, mkey); err != nil || !bytes.Equal(b, manifest) {
					t.Fatalf("Get = %q, %v", b, err)
				}
			}
			if n := c.Stats().WriteErrors; n < 4 {
				t.Errorf("%d write errors counted, want at least 4", n)
			}
			if n := strings.Count(buf.String(), "level=WARN"); n != 1 {
				t.Errorf("%d warnings, want 1: %s", n, &buf)
			}
		})
	}
}
