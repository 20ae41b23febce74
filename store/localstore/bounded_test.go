package localstore

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/storetest"
)

// plantFIFO makes a FIFO, which nothing writes, at the file of key.
func plantFIFO(t *testing.T, dir, key string) {
	storetest.MakeFIFO(t, filepath.Join(dir, filepath.FromSlash(key)))
}

// A FIFO at a key makes every read of it fail at once, saying what it is,
// rather than block until a writer comes (issue 22, item 8).
func TestFIFOAtKeyFailsAtOnce(t *testing.T) {
	s, dir := newStore(t)
	ctx := t.Context()
	const key = "runs/r1/events/e.json"
	plantFIFO(t, dir, key)
	d := casOf([]byte("member"))
	plantFIFO(t, dir, "cas/blake3/"+strings.TrimPrefix(d, "blake3:"))
	obj, _ := store.NewCAS(d)
	for name, f := range map[string]func() error{
		"Get":  func() error { _, err := s.Get(ctx, key); return err },
		"Open": func() error { _, _, err := s.Open(ctx, key); return err },
		"Load": func() error { _, _, err := s.Load(ctx, key); return err },
		"Put":  func() error { return s.Put(ctx, key, []byte("x")) },
		"ReadRange": func() error {
			rc, err := s.ReadRange(ctx, obj, 0, -1)
			if err == nil {
				_, err = io.ReadAll(rc)
				rc.Close()
			}
			return err
		},
	} {
		err := storetest.Soon(t, name, f)
		if err == nil || !strings.Contains(err.Error(), "FIFO") && !strings.Contains(err.Error(), "different bytes") {
			t.Errorf("%s of a FIFO: %v; want it refused", name, err)
		}
	}
	// PutCAS replaces what is not the blob, a FIFO included.
	if err := storetest.Soon(t, "PutCAS", func() error {
		_, err := s.PutCAS(ctx, d, bytes.NewReader([]byte("member")), 6)
		return err
	}); err != nil {
		t.Fatalf("PutCAS over a FIFO: %v", err)
	}
}

// A blob larger than its kind's limit is refused before it is read,
// naming the key and the limit.
func TestGetRefusesOversizedBlob(t *testing.T) {
	s, dir := newStore(t)
	const key = "runs/r1/events/e.json"
	p := filepath.Join(dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, store.MaxRecord+1); err != nil { // sparse
		t.Fatal(err)
	}
	for name, f := range map[string]func() error{
		"Get":  func() error { _, err := s.Get(t.Context(), key); return err },
		"Open": func() error { _, _, err := s.Open(t.Context(), key); return err },
		"Load": func() error { _, _, err := s.Load(t.Context(), key); return err },
	} {
		err := f()
		if !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "16 MiB") {
			t.Errorf("%s of 16 MiB + 1 under runs/: %v; want it refused naming the key and 16 MiB", name, err)
		}
	}
	if _, err := s.GetAtMost(t.Context(), key, store.MaxRecord+1); err != nil {
		t.Fatalf("GetAtMost with room for it: %v", err)
	}
}
