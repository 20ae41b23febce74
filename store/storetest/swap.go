// Package storetest checks that a store backend keeps the store package's
// contracts, the way testing/fstest checks an fs.FS: each backend's tests
// run the same checks against it.
package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/pinfs/pinfs/store"
)

// TestSwapper checks s's Load and Swap one call at a time on a key of its
// own: Load of an absent key, a create with rev "", and that a Swap from a
// revision that is not the current one (or from "" over an existing key)
// loses with store.ErrConflict and leaves the key as it was.
func TestSwapper(t *testing.T, s store.Swapper) {
	t.Helper()
	ctx := t.Context()
	const key = "storetest/swap/head"
	load := func(want string) string {
		t.Helper()
		data, rev, err := s.Load(ctx, key)
		if err != nil || string(data) != want || rev == "" {
			t.Fatalf("Load = %q, revision %q, %v; want %q and a revision", data, rev, err, want)
		}
		return rev
	}
	conflict := func(data, rev string) {
		t.Helper()
		if err := s.Swap(ctx, key, []byte(data), rev); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("Swap(%q from revision %q) = %v; want ErrConflict", data, rev, err)
		}
	}
	if _, _, err := s.Load(ctx, key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Load of an absent key = %v; want ErrNotFound", err)
	}
	if err := s.Swap(ctx, key, []byte("one"), ""); err != nil {
		t.Fatalf("Swap creating the key: %v", err)
	}
	rev1 := load("one")
	conflict("x", "")
	if err := s.Swap(ctx, key, []byte("two"), rev1); err != nil {
		t.Fatalf("Swap from the revision read: %v", err)
	}
	rev2 := load("two")
	if rev2 == rev1 {
		t.Fatalf("revision %q did not change with the bytes", rev1)
	}
	conflict("three", rev1)
	load("two")
	if err := s.Swap(ctx, "storetest/swap/absent", []byte("x"), rev2); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Swap of an absent key from a revision = %v; want ErrConflict", err)
	}
	if err := s.Swap(ctx, "../escape", []byte("x"), ""); err == nil {
		t.Fatal("Swap of a key outside the store root succeeded")
	}
}

// RaceSwap runs rounds of writers concurrent Swaps of one key from the
// revision last read: exactly one must win each round, the others lose
// with store.ErrConflict, and the key must hold the winner's bytes.
func RaceSwap(t *testing.T, s store.Swapper, writers, rounds int) {
	t.Helper()
	ctx := t.Context()
	const key = "storetest/race/head"
	rev := ""
	for round := range rounds {
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() { errs[i] = s.Swap(ctx, key, bytesOf(round, i), rev) })
		}
		wg.Wait()
		winner := OneWinner(t, fmt.Sprintf("round %d", round), errs)
		data, r, err := s.Load(ctx, key)
		if err != nil || string(data) != string(bytesOf(round, winner)) {
			t.Fatalf("round %d: the key holds %q, %v; want writer %d's bytes", round, data, err, winner)
		}
		rev = r
	}
}

func bytesOf(round, writer int) []byte { return fmt.Appendf(nil, "round %d writer %d", round, writer) }

// OneWinner checks the results of concurrent conditional writes: exactly
// one succeeded and every other failed with store.ErrConflict. It returns
// the winner's index.
func OneWinner(t testing.TB, what string, errs []error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("%s: writers %d and %d both won", what, winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, store.ErrConflict):
			t.Fatalf("%s: writer %d: %v; want ErrConflict", what, i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("%s: no writer won", what)
	}
	return winner
}
