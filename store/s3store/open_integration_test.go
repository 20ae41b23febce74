package s3store

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/pinfs/pinfs/store"
)

// TestRealOpen streams a store blob from versitygw: the bytes and size Get
// gives, ErrNotFound for a missing key, and a hostile key refused.
func TestRealOpen(t *testing.T) {
	srv, c := startReal(t)
	srv.CreateBucket(t, "pinstore", true)
	b := mustBucket(t, c, "pinstore", "pinfs")
	if _, _, err := b.Open(ctx, "tables/missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Open(missing) = %v; want ErrNotFound", err)
	}
	if _, _, err := b.Open(ctx, "../escape"); err == nil {
		t.Error("Open(../escape): want an error")
	}
	data := bytes.Repeat([]byte("member table line\n"), 300_000) // 5.4 MB: several reads
	if err := b.Put(ctx, "tables/t", data); err != nil {
		t.Fatal(err)
	}
	rc, n, err := b.Open(ctx, "tables/t")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil || n != int64(len(data)) || !bytes.Equal(got, data) {
		t.Errorf("Open: %d bytes (size %d), %v; want the %d bytes put", len(got), n, err, len(data))
	}
}
