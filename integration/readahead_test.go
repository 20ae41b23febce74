package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfs/pinfs/integration/fusetest"
	"github.com/pinfs/pinfs/integration/s3test"
	"github.com/pinfs/pinfs/store/blocks"
)

// A buffered sequential read through the kernel (its own readahead sends
// 1 MiB reads, several at once, served in parallel) is one stream to the
// block reader: the window grows to --readahead-max rather than closing
// at reads that arrive out of order, and every block is fetched once.
func TestReadaheadThroughTheKernel(t *testing.T) {
	t.Parallel()
	fusetest.Require(t)
	s := s3test.Start(t)
	s.CreateBucket(t, "data", true)
	s.CreateBucket(t, "store", true)
	const size = 48 << 20
	data := randomBytes(t, size)
	s.Put(t, "data", "ds/big.bin", data)
	env, st := s.Env(), "s3://store/pinfs"
	digest := mustPinfs(t, env, "pin", "s3://data/ds/", "--store", st).lastLine()
	work := t.TempDir()
	dir := filepath.Join(work, "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d := startMount(t, env, dir, digest, dir, "--store", st, "--cache-dir", filepath.Join(work, "cache"),
		"--run-record", filepath.Join(work, "runs.jsonl"), "--metrics-addr", "127.0.0.1:0", "--readahead-max", "32MiB")
	if got, err := readFile(t, filepath.Join(dir, "big.bin")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes (%v), want the %d pinned ones", len(got), err, len(data))
	}
	if w := scrape(t, d, `pinfs_readahead_window_max_bytes\{[^}]*\}`); w != 32<<20 {
		t.Errorf("largest readahead window %d MiB, want 32 MiB (--readahead-max)", w>>20)
	}
	if n := settled(t, d, `pinfs_network_fetches_total\{[^}]*\}`); n != size/blocks.BlockSize {
		t.Errorf("%d blocks fetched for %d", n, size/blocks.BlockSize)
	}
	if n := scrape(t, d, `pinfs_readahead_resets_total\{[^}]*\}`); n != 0 {
		t.Errorf("the window closed %d times in one sequential read", n)
	}
	if n := scrape(t, d, `pinfs_readahead_fetches_total\{[^}]*\}`); n == 0 {
		t.Error("no readahead")
	}
	if b := scrape(t, d, `pinfs_readahead_budget_bytes\{[^}]*\}`); b != blocks.DefaultReadaheadBudget {
		t.Errorf("readahead budget %d, want the default %d", b, blocks.DefaultReadaheadBudget)
	}
}
