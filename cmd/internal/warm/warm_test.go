package warm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/cmd/internal/pin"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/store/dial"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// snapshot is a directory pinned into a local store.
type snapshot struct {
	st    store.Store
	dir   string // the store's directory
	d     verify.Digest
	files map[string][]byte
}

func pinned(t *testing.T) *snapshot {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	s := &snapshot{dir: filepath.Join(t.TempDir(), "store"), files: map[string][]byte{
		"train/big.bin":   random(3<<20 + 100), // four blocks, the last partial
		"train/small.bin": random(5000),
		"val/same.bin":    nil, // the same bytes as train/small.bin: set below
		"val/other.bin":   random(70_000),
		"empty":           {},
	}}
	s.files["val/same.bin"] = s.files["train/small.bin"]
	src := t.TempDir()
	for p, b := range s.files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if s.st, err = dial.Open(ctx, s.dir); err != nil {
		t.Fatal(err)
	}
	rule, _ := pin.ParseSplitRule("dir")
	if s.d, err = (&pin.Pinner{Store: s.st, Options: pin.Options{Split: rule}}).Dir(ctx, src); err != nil {
		t.Fatal(err)
	}
	return s
}

// warm opens cache dir dir with a disk budget of limit and warms paths.
func (s *snapshot) warm(t *testing.T, dir string, limit int64, split string, paths ...string) (*Summary, error) {
	t.Helper()
	ctx := context.Background()
	c, err := Open(ctx, s.st, s.d, dir, Tuning{DiskBytes: limit}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sel, err := Select(c.Snapshot.Table(), paths, split)
	if err != nil {
		t.Fatal(err)
	}
	var bar bytes.Buffer
	sum, err := Run(ctx, c, sel, Options{Jobs: 3, Progress: &bar})
	if err == nil && !strings.Contains(bar.String(), "100%") {
		t.Errorf("progress bar never reached 100%%: %q", bar.String())
	}
	return sum, err
}

// cachedBytes returns the bytes of member path's blocks in the disk cache
// under dir, each checked against the pinned bytes.
func (s *snapshot) cachedBytes(t *testing.T, dir, path string) int64 {
	t.Helper()
	disk, err := cache.OpenDisk(filepath.Join(dir, "blocks"), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	want := s.files[path]
	var n int64
	for i := int64(0); i*blocks.BlockSize < int64(len(want)); i++ {
		b, ok := disk.Get(cache.Key{Digest: b3.Of(want), Index: i}, int64(len(want)))
		if !ok {
			continue
		}
		if !bytes.Equal(b, want[i*blocks.BlockSize:min(int64(len(want)), (i+1)*blocks.BlockSize)]) {
			t.Errorf("%s block %d in the disk cache differs from the pinned bytes", path, i)
		}
		n += int64(len(b))
	}
	return n
}

func TestRunWarmsTheSelection(t *testing.T) {
	s := pinned(t)
	dir := t.TempDir()
	sum, err := s.warm(t, dir, 1<<30, "val")
	if err != nil {
		t.Fatal(err)
	}
	// val/same.bin shares its blocks with train/small.bin: they are cached
	// by content, so that one is on disk too.
	want := Summary{Members: 2, Bytes: 75_000, FetchedBytes: 75_000}
	if sum.Members != want.Members || sum.Bytes != want.Bytes || sum.CachedBytes != 0 || sum.FetchedBytes != want.FetchedBytes {
		t.Errorf("warm --split val: %+v, want %+v", sum, want)
	}
	for p, b := range s.files {
		got := s.cachedBytes(t, dir, p)
		if wantIn := strings.HasPrefix(p, "val/") || p == "train/small.bin"; wantIn && got != int64(len(b)) || !wantIn && got != 0 {
			t.Errorf("%s: %d of %d bytes cached after warm --split val", p, got, len(b))
		}
	}

	sum, err = s.warm(t, dir, 1<<30, "", "/train", "empty")
	if err != nil {
		t.Fatal(err)
	}
	if sum.Members != 3 || sum.Bytes != 3<<20+5100 || sum.CachedBytes != 5000 || sum.FetchedBytes != 3<<20+100 {
		t.Errorf("warm train empty: %+v", sum)
	}
	sum, err = s.warm(t, dir, 1<<30, "")
	if err != nil {
		t.Fatal(err)
	}
	if sum.Members != 5 || sum.FetchedBytes != 0 || sum.CachedBytes != sum.Bytes {
		t.Errorf("warm of a warm cache: %+v, want everything cached and nothing fetched", sum)
	}
	for p, b := range s.files {
		if got := s.cachedBytes(t, dir, p); got != int64(len(b)) {
			t.Errorf("%s: %d of %d bytes cached", p, got, len(b))
		}
		if len(b) == 0 {
			continue
		}
		// Each member warmed is one whole-member file, 0400, of its size:
		// what the open path hands to the kernel.
		h := b3.Of(b).Hex()
		info, err := os.Lstat(filepath.Join(dir, "blocks", h[:2], h))
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm() != 0o400 || info.Size() != int64(len(b)) {
			t.Errorf("%s: no whole-member file of %d bytes, mode 0400, after warm: %v, %v", p, len(b), info, err)
		}
	}
}

func TestRunRefusesWhatDoesNotFit(t *testing.T) {
	s := pinned(t)
	dir := t.TempDir()
	for _, limit := range []int64{0, 3 << 20} {
		if _, err := s.warm(t, dir, limit, ""); !errors.Is(err, ErrBudget) {
			t.Errorf("warm with --cache-disk %d: %v, want ErrBudget", limit, err)
		}
	}
	if got := s.cachedBytes(t, dir, "val/other.bin"); got != 0 {
		t.Errorf("a refused warm cached %d bytes", got)
	}
}

func TestRunFailsOnTamperedBytes(t *testing.T) {
	s := pinned(t)
	sum := b3.Of(s.files["train/big.bin"])
	blob := filepath.Join(s.dir, "cas", "blake3", strings.TrimPrefix(sum.String(), "blake3:"))
	b, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	b[2<<20+7] ^= 1 // block 2
	if err := os.WriteFile(blob, b, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, err = s.warm(t, dir, 1<<30, "", "train/big.bin")
	if !errors.Is(err, b3.ErrMismatch) || !strings.Contains(err.Error(), `member "train/big.bin": content does not match`) {
		t.Fatalf("warm of a tampered member: %v", err)
	}
	disk, err := cache.OpenDisk(filepath.Join(dir, "blocks"), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	if disk.Has(cache.Key{Digest: sum, Index: 2}, int64(len(s.files["train/big.bin"]))) {
		t.Error("the tampered block is in the disk cache")
	}
}
