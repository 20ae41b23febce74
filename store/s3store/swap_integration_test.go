package s3store

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/pinfs/pinfs/store"
)

// TestRealSwapExclusive: versitygw (v1.8.0) keeps conditional PUTs atomic
// per key: of 32 Swaps from one ETag, exactly one wins each round and the
// others lose with ErrConflict; of 32 creates, exactly one.
func TestRealSwapExclusive(t *testing.T) {
	srv, c := startReal(t)
	srv.CreateBucket(t, "store", true)
	b := mustBucket(t, c, "store", "pinfs")
	const writers, rounds = 32, 5
	race := func(round int, rev string) {
		t.Helper()
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() { errs[i] = b.Swap(ctx, "gates/g/head", fmt.Appendf(nil, "round %d writer %d", round, i), rev) })
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both won", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, store.ErrConflict):
				t.Fatalf("round %d writer %d: %v; want ErrConflict", round, i, err)
			}
		}
		if data, _, err := b.Load(ctx, "gates/g/head"); err != nil || winner < 0 || string(data) != fmt.Sprintf("round %d writer %d", round, winner) {
			t.Fatalf("round %d: winner %d, key holds %q, %v", round, winner, data, err)
		}
	}
	race(0, "")
	for round := 1; round <= rounds; round++ {
		_, rev, err := b.Load(ctx, "gates/g/head")
		if err != nil {
			t.Fatal(err)
		}
		race(round, rev)
	}
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
