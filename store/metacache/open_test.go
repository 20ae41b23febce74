package metacache

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

// streamer is a remote that can also stream, and counts the streams.
type streamer struct {
	remote
	opens int
}

func (s *streamer) Open(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	s.opens++
	b, ok := s.blobs[key]
	if !ok {
		return nil, 0, store.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}

func readAll(t *testing.T, c *Cache, key string) ([]byte, error) {
	t.Helper()
	rc, size, err := c.Open(context.Background(), key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err == nil && size != int64(len(b)) {
		t.Errorf("Open size %d, read %d bytes", size, len(b))
	}
	return b, err
}

func TestOpenStreamsAndKeepsIntactTables(t *testing.T) {
	table := []byte("{\"path\":\"a\"}\n")
	key := verify.MembersKey(verify.SHA256(table))
	r := &streamer{remote: remote{blobs: map[string][]byte{key: table}}}
	dir := t.TempDir()
	c := New(dir, r)
	for range 2 {
		if b, err := readAll(t, c, key); err != nil || !bytes.Equal(b, table) {
			t.Fatalf("Open = %q, %v", b, err)
		}
	}
	if r.opens != 1 || r.gets != 0 {
		t.Errorf("%d remote opens and %d gets, want one open (the second from the cache)", r.opens, r.gets)
	}
	if kept, err := os.ReadFile(filepath.Join(dir, key)); err != nil || !bytes.Equal(kept, table) {
		t.Errorf("kept copy %q, %v", kept, err)
	}

	// A table that does not match its key fails at its end, and is not kept.
	bad := verify.MembersKey(verify.SHA256([]byte("other")))
	r.blobs[bad] = table
	if _, err := readAll(t, c, bad); !errors.Is(err, verify.ErrInvalid) {
		t.Errorf("bad remote table: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, bad)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bad remote table kept: %v", err)
	}
	// A table read only in part is not kept.
	part := []byte("{\"path\":\"b\"}\n")
	pkey := verify.MembersKey(verify.SHA256(part))
	r.blobs[pkey] = part
	rc, _, err := c.Open(context.Background(), pkey)
	if err != nil {
		t.Fatal(err)
	}
	rc.Read(make([]byte, 3))
	rc.Close()
	if _, err := os.Stat(filepath.Join(dir, pkey)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("table read in part kept: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "members", "sha256")); len(ents) != 1 {
		t.Errorf("members dir holds %d files, want the one intact table", len(ents))
	}
}

func TestOpenWithoutStreamingRemote(t *testing.T) {
	table := []byte("{\"path\":\"a\"}\n")
	key := verify.MembersKey(verify.SHA256(table))
	r := &remote{blobs: map[string][]byte{key: table}}
	c := New(t.TempDir(), r)
	if b, err := readAll(t, c, key); err != nil || !bytes.Equal(b, table) || r.gets != 1 {
		t.Fatalf("Open = %q, %v after %d gets", b, err, r.gets)
	}
	if _, err := readAll(t, c, verify.MembersKey(verify.SHA256([]byte("x")))); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing table: %v", err)
	}
}

// TestOpenNoCopyKeepsNothing: OpenNoCopy streams a table from the store
// without keeping it, and reads a local copy when there is one.
func TestOpenNoCopyKeepsNothing(t *testing.T) {
	table := []byte("{\"path\":\"a\"}\n")
	key := verify.MembersKey(verify.SHA256(table))
	r := &streamer{remote: remote{blobs: map[string][]byte{key: table}}}
	dir := t.TempDir()
	c := New(dir, r)
	read := func() []byte {
		rc, _, err := c.OpenNoCopy(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		return b
	}
	for range 2 {
		if b := read(); !bytes.Equal(b, table) {
			t.Fatalf("read %q", b)
		}
	}
	if r.opens != 2 {
		t.Errorf("%d remote opens, want 2 (nothing kept)", r.opens)
	}
	if _, err := os.Stat(filepath.Join(dir, key)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a copy was kept: %v", err)
	}
	if b, err := readAll(t, c, key); err != nil || !bytes.Equal(b, table) { // Open keeps one
		t.Fatal(err)
	}
	if b := read(); !bytes.Equal(b, table) || r.opens != 3 {
		t.Errorf("read %q after %d opens, want the local copy", b, r.opens)
	}
}
