package bench

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// putObjects PUTs n objects under data/prefix with the raw client on
// loopback (setup is not measured; 4 at a time): object i is member
// name(i) with the bytes gen(i). It returns them and their sizes.
func (sh *shapedRun) putObjects(t *testing.T, prefix string, n int, name func(int) string, gen func(int) []byte) ([]smallObj, []int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	objs, sizes := make([]smallObj, n), make([]int64, n)
	t0 := time.Now()
	err := parallel(n, 4, func(i int, _ []byte) error {
		data := gen(i)
		m := name(i)
		v, err := put(ctx, sh.bench.client, "data", prefix+m, data)
		objs[i], sizes[i] = smallObj{key: prefix + m, member: m, version: v}, int64(len(data))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, s := range sizes {
		total += s
	}
	syscall.Sync() // the server's writes on disk before anything is measured, not written back during it
	sh.note("setup: PUT of %d objects under data/%s (%.2f GB, 4 in parallel, loopback) took %.1f s", n, prefix, float64(total)/1e9, time.Since(t0).Seconds())
	return objs, sizes
}

// rawBest is the raw client's best aggregate rate reading objs (of
// sizes) through the proxy as 8 MiB ranged GETs, each count of streams
// tried once after warming the server's files; it returns the best
// measurement and the row's cell for it.
func (sh *shapedRun) rawBest(t *testing.T, objs []smallObj, sizes []int64, streams []int, what string) (measure, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const part = 8 << 20
	type rng struct {
		obj    int
		off, n int64
	}
	var parts []rng
	var total int64
	for i, s := range sizes {
		for off := int64(0); off < s; off += part {
			parts = append(parts, rng{i, off, min(part, s-off)})
		}
		total += s
	}
	best, bestStreams := measure{}, 0
	for _, st := range streams {
		sh.warmBucket(t, "data", objs...)
		s0 := sh.sample(0)
		err := parallel(len(parts), st, func(i int, buf []byte) error {
			p := parts[i]
			o := objs[p.obj]
			_, err := getRange(ctx, sh.client, "data", o.key, o.version, p.off, p.n, buf)
			return err
		})
		if err != nil {
			t.Fatalf("raw GET of %s, %d streams: %v", what, st, err)
		}
		m := sh.done(fmt.Sprintf("shaped: raw parallel GET %s, 8 MiB parts, %d streams", what, st), s0, 0, total, -1)
		if bestStreams == 0 || m.gbps() > best.gbps() {
			best, bestStreams = m, st
		}
	}
	tried := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(streams)), "/"), "[]")
	return best, fmt.Sprintf("%s (8 MiB parts, %d at a time; best of %s)", gbs(best.gbps()), bestStreams, tried)
}
