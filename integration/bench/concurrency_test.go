package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The fixture of issue 38's local-store rows: concMembers members of
// concSize random bytes, pinned from a directory into a local store.
const (
	concMembers = 64
	concSize    = 256 << 20
	// concOneCount is how many members the one reader reads, one after
	// the other: the bytes of the 16-reader run.
	concOneCount = 16
)

// concReaders are the reader counts of the rows: one, a node's 16, 64.
var concReaders = []int{1, 16, 64}

// concFixture is the pinned snapshot of the concurrency rows.
type concFixture struct {
	store, digest string
	paths         []string // member paths in the mount, m-00.bin, …
	blobs         []string // each member's bytes in the store (cas/blake3/<hex>)
	hexes         []string // each member's BLAKE3 digest, hex
}

// concurrency is issue 38's local-store scenario (PINFS_BENCH_ONLY=
// concurrency runs it alone, with the 4 GiB member): 1, 16 and 64
// sequential readers (dd bs=1M) of different 256 MiB members of one
// mount, store files in the page cache, the mount's page cache dropped
// between runs by a new mount; daemon CPU per GB against one reader's and
// single-thread b3sum's, GC cycles per GB (GODEBUG=gctrace=1), peak RSS
// against the memory bound the mount logs; then --memory-target.
func (b *bench) concurrency(t *testing.T) {
	fx := b.concSetup(t)
	b3 := map[int]b3sumFig{
		concOneCount: b.b3sumSingle(t, fx, concOneCount),
		concMembers:  b.b3sumSingle(t, fx, concMembers),
	}
	b.note("concurrency rows (issue 38): %d × 256 MiB (ChaCha8 bytes) pinned from a directory into a local store; before each run the store "+
		"files it reads are read once (page cache warm) and a new mount with a fresh --cache-dir is made (the mount's page cache starts empty); "+
		"the daemon runs with %s and its collections are counted from its log. One reader = one dd bs=1M reading %d members one after the other "+
		"(the bytes of the 16-reader run); N readers = N dd bs=1M at once, one member each. MemAvailable at the start: %s.",
		concMembers, gctraceEnv, concOneCount, memAvailable())
	variants := []struct {
		name  string
		flags []string
	}{{"default flags", nil}, {"--cache-disk 0", []string{"--cache-disk", "0"}}}
	byVariant := map[string]map[int]concResult{}
	for _, v := range variants {
		res := map[int]concResult{}
		for _, n := range concReaders {
			res[n] = b.concRun(t, fx, fmt.Sprintf("local store, %s, %s (%s)", readersText(n), v.name, "dd bs=1M"), n, v.flags...)
		}
		byVariant[v.name] = res
	}
	b.concRows(byVariant["default flags"], b3)
	b.concNoDiskRows(byVariant["--cache-disk 0"], b3)
	b.memTargetRows(t, fx, byVariant["default flags"][64])
}

// readersText names a run: "1 sequential reader of 16 members one after
// the other" or "16 sequential readers of 16 members at once".
func readersText(n int) string {
	if n == 1 {
		return fmt.Sprintf("1 sequential reader of %d × 256 MiB members one after the other", concOneCount)
	}
	return fmt.Sprintf("%d sequential readers of %d different 256 MiB members at once", n, n)
}

// concSetup writes the members (ChaCha8, seed 38), pins them into a new
// local store, removes the source and finds each member's store file.
func (b *bench) concSetup(t *testing.T) *concFixture {
	t.Helper()
	src, store := t.TempDir(), t.TempDir()
	fx := &concFixture{store: store}
	t0 := time.Now()
	for i := range concMembers {
		fx.paths = append(fx.paths, fmt.Sprintf("m-%02d.bin", i))
	}
	err := parallel(concMembers, 2, func(i int, buf []byte) error {
		return writeRandom(filepath.Join(src, fx.paths[i]), concSize, rand.NewChaCha8([32]byte{38, byte(i)}), buf)
	})
	if err != nil {
		t.Fatal(err)
	}
	b.note("setup: writing %d × 256 MiB of random bytes took %.1f s", concMembers, time.Since(t0).Seconds())
	fx.digest = b.pin(t, src, store, nil, fmt.Sprintf("%d × 256 MiB local files into a local store", concMembers))
	if err := os.RemoveAll(src); err != nil {
		t.Fatal(err)
	}
	// The pin wrote 16 GiB: have it on disk before measuring, or its
	// writeback runs in the first rows.
	syscall.Sync()
	byPath, err := b.memberDigests(fx.digest, store)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range fx.paths {
		hex, ok := byPath[p]
		if !ok {
			t.Fatalf("pinfs ls %s lists no member %s", fx.digest, p)
		}
		blob := filepath.Join(store, "cas", "blake3", hex)
		if got := fileSize(t, blob); got != concSize {
			t.Fatalf("%s: store file %s has %d bytes, want %d", p, blob, got, concSize)
		}
		fx.blobs, fx.hexes = append(fx.blobs, blob), append(fx.hexes, hex)
	}
	return fx
}

// writeRandom writes size bytes of r to path, len(buf) at a time.
func writeRandom(path string, size int, r io.Reader, buf []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	for left := size; left > 0; left -= len(buf) {
		chunk := buf[:min(len(buf), left)]
		r.Read(chunk)
		if _, err := f.Write(chunk); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// memberDigests returns the BLAKE3 digest (hex) of every member of
// snapshot d, by path, from `pinfs ls --json` (the member table).
func (b *bench) memberDigests(d, store string) (map[string]string, error) {
	r := run(5*time.Minute, nil, b.bin, "ls", d, "--store", store, "--json")
	if r.err != nil {
		return nil, fmt.Errorf("pinfs ls --json: %v: %s", r.err, r.stderr)
	}
	out := map[string]string{}
	s := bufio.NewScanner(strings.NewReader(r.stdout))
	for s.Scan() {
		var m struct{ Path, Digest string }
		if err := json.Unmarshal(s.Bytes(), &m); err != nil {
			return nil, fmt.Errorf("pinfs ls --json: %q: %v", s.Text(), err)
		}
		hex, ok := strings.CutPrefix(m.Digest, "blake3:")
		if !ok {
			return nil, fmt.Errorf("pinfs ls --json: %s has digest %q, not blake3:", m.Path, m.Digest)
		}
		out[m.Path] = hex
	}
	return out, s.Err()
}

// warmFiles reads files whole once (into the page cache).
func warmFiles(t *testing.T, files []string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.CopyBuffer(io.Discard, f, buf)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// memAvailable is MemAvailable of /proc/meminfo, in GB.
func memAvailable() string {
	if v := procMeminfo("MemAvailable"); v >= 0 {
		return fmt.Sprintf("%.1f GB", float64(v)/1e9)
	}
	return "unknown"
}

// procMeminfo returns a kB field of /proc/meminfo in bytes (-1 when absent).
func procMeminfo(field string) int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			var n int64
			fmt.Sscan(v, &n)
			return n << 10
		}
	}
	return -1
}
