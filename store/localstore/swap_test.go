package localstore

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/storetest"
)

func TestSwap(t *testing.T) {
	s, _ := newStore(t)
	storetest.TestSwapper(t, s)
	if data, rev, err := s.Load(t.Context(), "storetest/swap/head"); err != nil || rev != revision(data) {
		t.Fatalf("Load = %q, revision %q, %v; want the SHA-256 of the bytes", data, rev, err)
	}
}

// TestSwapRefusesLinks: a symbolic link at the key is neither read nor
// replaced, nor is one at its lock file followed.
func TestSwapRefusesLinks(t *testing.T) {
	s, dir := newStore(t)
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "k"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "k", "head")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Load(t.Context(), "k/head"); err == nil {
		t.Fatal("Load read through a symbolic link")
	}
	if err := s.Swap(t.Context(), "k/head", []byte("x"), revision([]byte("secret"))); err == nil {
		t.Fatal("Swap replaced a symbolic link")
	}
	if err := os.Symlink(target, filepath.Join(dir, "k", lockPrefix+"other")); err != nil {
		t.Fatal(err)
	}
	if err := s.Swap(t.Context(), "k/other", []byte("x"), ""); err == nil {
		t.Fatal("Swap opened its lock file through a symbolic link")
	}
	if b, _ := os.ReadFile(target); string(b) != "secret" {
		t.Fatalf("the link's target was changed to %q", b)
	}
}

// TestSwapExclusive: of many concurrent Swaps from one revision exactly
// one wins, the others lose with ErrConflict.
func TestSwapExclusive(t *testing.T) {
	s, _ := newStore(t)
	storetest.RaceSwap(t, s, 16, 10)
}

// TestSwapProcesses: processes that each increment a counter with
// Load and Swap (retrying lost races) lose no increment: the lock works
// across processes, not just goroutines.
func TestSwapProcesses(t *testing.T) {
	if dir := os.Getenv("PINFS_SWAP_CHILD"); dir != "" {
		swapChild(t, dir)
		return
	}
	s, dir := newStore(t)
	if err := s.Swap(t.Context(), "counter", []byte("0"), ""); err != nil {
		t.Fatal(err)
	}
	const procs, each = 6, 20
	var wg sync.WaitGroup
	outs := make([][]byte, procs)
	errs := make([]error, procs)
	for i := range procs {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSwapProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), "PINFS_SWAP_CHILD="+dir, "PINFS_SWAP_EACH="+strconv.Itoa(each))
		wg.Go(func() { outs[i], errs[i] = cmd.CombinedOutput() })
	}
	wg.Wait()
	for i := range procs {
		if errs[i] != nil {
			t.Fatalf("child %d: %v\n%s", i, errs[i], outs[i])
		}
	}
	data, _, err := s.Load(t.Context(), "counter")
	if err != nil || string(data) != strconv.Itoa(procs*each) {
		t.Fatalf("counter = %q, %v; want %d", data, err, procs*each)
	}
}

func swapChild(t *testing.T, dir string) {
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	each, _ := strconv.Atoi(os.Getenv("PINFS_SWAP_EACH"))
	for done := 0; done < each; {
		data, rev, err := s.Load(t.Context(), "counter")
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(string(data))
		if err != nil {
			t.Fatal(err)
		}
		switch err := s.Swap(t.Context(), "counter", []byte(strconv.Itoa(n+1)), rev); {
		case err == nil:
			done++
		case !errors.Is(err, store.ErrConflict):
			t.Fatal(err)
		}
	}
}

func TestList(t *testing.T) {
	s, dir := newStore(t)
	ctx := t.Context()
	if keys, err := s.List(ctx, "gates/"); err != nil || len(keys) != 0 {
		t.Fatalf("List(empty store) = %q, %v", keys, err)
	}
	for _, k := range []string{"gates/a/head", "gates/a.b/head", "gates/a/records/sha256/00", "manifests/sha256/11", "gatesx"} {
		if err := s.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Swap(ctx, "gates/b/head", []byte("h"), ""); err != nil { // leaves a lock file
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gates", "a", ".tmp-head-123"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "gates", "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"gates/", []string{"gates/a.b/head", "gates/a/head", "gates/a/records/sha256/00", "gates/b/head"}},
		{"gates", []string{"gates/a.b/head", "gates/a/head", "gates/a/records/sha256/00", "gates/b/head", "gatesx"}},
		{"gates/a/", []string{"gates/a/head", "gates/a/records/sha256/00"}},
		{"gates/a", []string{"gates/a.b/head", "gates/a/head", "gates/a/records/sha256/00"}},
		{"manifests/sha256/", []string{"manifests/sha256/11"}},
		{"nothing/here/", nil},
		{"gates/a/head/", nil},
	} {
		got, err := s.List(ctx, tc.prefix)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("List(%q) = %q, %v; want %q", tc.prefix, got, err, tc.want)
		}
	}
	all, err := s.List(ctx, "")
	if err != nil || len(all) != 6 {
		t.Errorf("List(\"\") = %q, %v; want 6 keys", all, err)
	}
	if _, err := s.List(ctx, "../"); err == nil {
		t.Error("List(../) succeeded")
	}
}
