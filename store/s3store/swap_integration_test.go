package s3store

import (
	"fmt"
	"slices"
	"testing"

	"github.com/pinfs/pinfs/store/storetest"
)

// TestRealSwapExclusive: versitygw (v1.8.0) keeps conditional PUTs atomic
// per key: of 32 Swaps from one ETag (or 32 creates), exactly one wins each
// round and the others lose with ErrConflict.
func TestRealSwapExclusive(t *testing.T) {
	srv, c := startReal(t)
	srv.CreateBucket(t, "store", true)
	b := mustBucket(t, c, "store", "pinfs")
	storetest.TestSwapper(t, b)
	storetest.RaceSwap(t, b, 32, 6)
}

func TestRealList(t *testing.T) {
	srv, c := startReal(t)
	srv.CreateBucket(t, "store", true)
	b := mustBucket(t, c, "store", "pinfs")
	var want []string
	for i := range 3 {
		want = append(want, fmt.Sprintf("gates/g%d/head", i))
		srv.Put(t, "store", "pinfs/"+want[i], []byte("x"))
	}
	srv.Put(t, "store", "pinfs/manifests/sha256/00", []byte("x"))
	srv.Put(t, "store", "elsewhere/gates/x/head", []byte("x"))
	if got, err := b.List(ctx, "gates/"); err != nil || !slices.Equal(got, want) {
		t.Fatalf("List(gates/) = %q, %v; want %q", got, err, want)
	}
	if got, err := b.List(ctx, "none/"); err != nil || len(got) != 0 {
		t.Fatalf("List(none/) = %q, %v", got, err)
	}
}
