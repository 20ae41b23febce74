package localstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/pinfs/pinfs/store"
)

// TestCreateExclusive: of many concurrent Creates of one key exactly one
// succeeds, the others fail with ErrExist, and the winner's bytes stay.
func TestCreateExclusive(t *testing.T) {
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = s.Create(t.Context(), "runs/r/run.json", fmt.Appendf(nil, "writer %d", i)) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner < 0:
			winner = i
		case err == nil:
			t.Fatalf("writers %d and %d both created the key", winner, i)
		case !errors.Is(err, store.ErrExist):
			t.Fatalf("writer %d: %v; want ErrExist", i, err)
		}
	}
	if got, err := s.Get(t.Context(), "runs/r/run.json"); err != nil || string(got) != fmt.Sprintf("writer %d", winner) {
		t.Fatalf("Get = %q, %v; want writer %d's bytes", got, err, winner)
	}
}

// TestCreateDoesNotFollowLinks: a symbolic link planted at the key is
// an existing key, and its target is left alone.
func TestCreateDoesNotFollowLinks(t *testing.T) {
	dir := t.TempDir()
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "target")
	if err := os.MkdirAll(filepath.Join(dir, "runs", "r"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "runs", "r", "run.json")); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(t.Context(), "runs/r/run.json", []byte("x")); err == nil {
		t.Fatal("Create wrote through a symbolic link")
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the link's target was created: %v", err)
	}
}

// TestCreateVisibleWhole: a writer that loses the race reads the key at
// once and finds the winner's bytes whole, never an empty or short file
// (derivations.Save and the gate read back the record that won).
func TestCreateVisibleWhole(t *testing.T) {
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := func(i int) []byte { return fmt.Appendf(nil, "%064d", i) }
	for round := range 50 {
		key := fmt.Sprintf("derivations/sha256/%d", round)
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				err := s.Create(t.Context(), key, data(i))
				if !errors.Is(err, store.ErrExist) {
					errs[i] = err
					return
				}
				got, err := s.Get(t.Context(), key)
				if err == nil && len(got) != len(data(0)) {
					err = fmt.Errorf("read %d bytes right after ErrExist, want %d", len(got), len(data(0)))
				}
				errs[i] = err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}
