package bench

import (
	"archive/tar"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The shaped shard loader of issue 38: shardProcs processes of
// shardWorkers workers read shardCount tar shards of about shardSize
// front to back in 1 MiB reads, as a WebDataset loader's workers do.
const (
	shardCount   = 32
	shardSize    = 128 << 20
	shardProcs   = 8
	shardWorkers = 4
)

// shardStreams are the raw client's concurrencies for the 32 shards.
var shardStreams = []int{32, 64}

// makeShard returns tar shard i: samples "NNNNNN.jpg" (random bytes,
// 64 KiB to 1 MiB) and "NNNNNN.cls" (a label), as many as fit in
// limit bytes with the end of archive; and the number of entries.
func makeShard(i, limit int) ([]byte, int) {
	r := rand.New(rand.NewPCG(38, uint64(i)))
	src := rand.NewChaCha8([32]byte{38, 128, byte(i)})
	var buf bytes.Buffer
	buf.Grow(limit)
	tw := tar.NewWriter(&buf)
	pad := func(n int) int { return (n + 511) &^ 511 }
	entries := 0
	for k := 0; ; k++ {
		size := 64<<10 + r.IntN(960<<10)
		label := []byte(strconv.Itoa(r.IntN(1000)))
		if buf.Len()+512+pad(size)+512+pad(len(label))+1024 > limit {
			break
		}
		data := make([]byte, size)
		src.Read(data)
		for _, e := range []struct {
			name string
			data []byte
		}{{fmt.Sprintf("%06d.jpg", k), data}, {fmt.Sprintf("%06d.cls", k), label}} {
			tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg})
			tw.Write(e.data)
			entries++
		}
	}
	tw.Close()
	return buf.Bytes(), entries
}

// shardLoader: the 32 shards read through a new mount (default flags) by
// 8 loader processes of 4 workers, process k reading shards k, k+8, …;
// against the raw client's best parallel GET of the same 32 objects.
func (sh *shapedRun) shardLoader(t *testing.T) {
	entries := make([]int, shardCount)
	objs, sizes := sh.putObjects(t, "shards/", shardCount, func(i int) string { return fmt.Sprintf("shard-%06d.tar", i) },
		func(i int) []byte {
			data, n := makeShard(i, shardSize)
			entries[i] = n
			return data
		})
	d := sh.pin(t, "s3://data/shards/", storeURL, sh.bench.env, fmt.Sprintf("%d tar shards of ~128 MiB", shardCount))
	raw, rawCell := sh.rawBest(t, objs, sizes, shardStreams, fmt.Sprintf("%d tar shards", shardCount))

	name := fmt.Sprintf("shaped: shard loader, %d processes × %d workers, %d tar shards of 128 MiB (default flags)", shardProcs, shardWorkers, shardCount)
	m := sh.mount(t, name, sh.env, d, storeURL, t.TempDir())
	lists := make([]string, shardProcs)
	var total int64
	for i, o := range objs {
		lists[i%shardProcs] += fmt.Sprintf("%s\t%d\t%d\n", filepath.Join(m.dir, o.member), sizes[i], entries[i])
		total += sizes[i]
	}
	sh.warmBucket(t, "data", objs...)
	s0 := sh.sample(m.pid)
	wall, cpu, err := shardProcsRun(t, lists)
	pm := sh.done("pinfs "+name, s0, m.pid, total, cpu)
	if err != nil {
		t.Fatalf("shard loader: %v", err)
	}
	pm.wall = wall
	sh.cpu[len(sh.cpu)-1] = pm
	sh.finish(t, m)
	sh.judge(row{scenario: fmt.Sprintf("shaped: shard loader, %d processes × %d workers, %d tar shards of 128 MiB front to back in 1 MiB reads: aggregate rate",
		shardProcs, shardWorkers, shardCount), pinfs: gbs(pm.gbps()), raw: rawCell, s3fs: "not run",
		target: fmt.Sprintf("≥ %.2f × raw", targetShardLoaderVsRaw), cpu: perGB(pm.daemon, pm.bytes)},
		pm.gbps()/raw.gbps(), true, targetShardLoaderVsRaw, "")
}

// shardProcsRun starts one TestShardLoaderProcess per list (lines
// "path\tsize\tentries") and returns the wall time from the first start to
// the last exit, their CPU seconds and the first failure.
func shardProcsRun(t *testing.T, lists []string) (time.Duration, float64, error) {
	dir := t.TempDir()
	envs := make([][]string, len(lists))
	for k, l := range lists {
		f := filepath.Join(dir, fmt.Sprintf("shards-%d", k))
		if err := os.WriteFile(f, []byte(l), 0o644); err != nil {
			return 0, 0, err
		}
		envs[k] = []string{shardListEnv + "=" + f, shardWorkersEnv + "=" + strconv.Itoa(shardWorkers)}
	}
	return helperProcs("TestShardLoaderProcess", envs)
}

// shardLine parses one line of a shard list.
func shardLine(line string) (path string, size int64, entries int, err error) {
	f := strings.Split(line, "\t")
	if len(f) != 3 {
		return "", 0, 0, fmt.Errorf("shard list line %q: want path, size and entries", line)
	}
	size, err = strconv.ParseInt(f[1], 10, 64)
	if err == nil {
		entries, err = strconv.Atoi(f[2])
	}
	return f[0], size, entries, err
}
