package bench

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rawStreams are the parallel GET counts tried for the best raw rate.
var rawStreams = []int{1, 4, 8, 16}

// sequential is scenario 1: the 1 GiB object read sequentially through
// pinfs cold, warm and from the disk cache with the store stopped, next to
// the raw client's best parallel GET, s3fs, the page cache and b3sum.
func (b *bench) sequential(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	big := b.bigObj()

	// Raw: parallel ranged GETs of 8 MiB parts at the exact version.
	var best measure
	bestStreams := 0
	for _, streams := range rawStreams {
		dropCaches(t)
		b.warmServer(t, big)
		s0 := b.sample(0)
		_, err := rawParallelGET(ctx, b.client, "data", bigKey, b.bigVersion, bigSize, 8<<20, streams)
		if err != nil {
			t.Fatalf("raw GET, %d streams: %v", streams, err)
		}
		m := b.done(fmt.Sprintf("raw parallel GET 8 MiB parts, %d streams", streams), s0, 0, bigSize, -1)
		t.Logf("raw %d streams: %.3f GB/s", streams, m.gbps())
		if m.gbps() > best.gbps() || bestStreams == 0 {
			best, bestStreams = m, streams
		}
	}
	b.rawBest = best.gbps()
	rawCell := fmt.Sprintf("%s (8 MiB × %d)", gbs(best.gbps()), bestStreams)

	// Local file in the page cache: read once, then the best of three
	// reads; b3sum of the same bytes, best of three.
	b.dd(t, "local 1 GiB file, first read (fills the page cache)", b.localFile, 0, bigSize)
	for i := range 3 {
		local := b.dd(t, fmt.Sprintf("local 1 GiB file in the page cache (dd bs=1M), read %d", i+1), b.localFile, 0, bigSize)
		b.pageCache = max(b.pageCache, local.gbps())
	}
	b.b3sum, b.b3sumErr = b.b3sumRate(t)

	// pinfs cold, then warm in the same mount.
	cache := t.TempDir()
	m := b.mount(t, "1 GiB cold + warm (cache-mem 256MiB, cache-disk 10GiB)", b.env, b.bigDigest, storeURL, cache,
		"--cache-mem", "256MiB", "--cache-disk", "10GiB")
	file := filepath.Join(m.dir, bigMember)
	dropCaches(t)
	b.warmServer(t, big)
	cold := b.dd(t, "pinfs 1 GiB cold sequential (dd bs=1M)", file, m.pid, bigSize)
	b.coldWall = cold.wall
	var warm measure
	for i := range 3 {
		w := b.dd(t, fmt.Sprintf("pinfs 1 GiB warm re-read, same mount, read %d", i+1), file, m.pid, bigSize)
		if i == 0 || w.gbps() > warm.gbps() {
			warm = w
		}
	}
	b.finish(t, m)

	// s3fs, cold, on the same server.
	s3, s3err := b.s3fsBig(t, b.s3fsLoopback(), "s3fs 1 GiB cold")
	s3Cell, s3CPU := s3fsCell(gbs(s3.gbps()), s3err), s3fsCell(perGB(s3.daemon, s3.bytes)+" s/GB (s3fs daemon)", s3err)

	cpuPerGB := cold.daemon / (float64(cold.bytes) / 1e9)
	rawPerGB := best.reader / (float64(best.bytes) / 1e9)
	b.judge(row{scenario: "pinfs daemon CPU per cold GB (1 GiB, dd bs=1M), as a multiple of the raw client's", pinfs: fmt.Sprintf("%.2f s/GB", cpuPerGB),
		raw: perGB(best.reader, best.bytes) + " s/GB (client, " + fmt.Sprint(bestStreams) + " streams)", s3fs: s3CPU,
		target: fmt.Sprintf("≤ %.1f × raw client", targetCPUPerColdGBVsRaw), cpu: perGB(cold.daemon, cold.bytes)},
		cpuPerGB/rawPerGB, false, targetCPUPerColdGBVsRaw, "no raw CPU figure")
	b.judge(row{scenario: "1 GiB cold sequential, dd bs=1M: vs s3fs", pinfs: gbs(cold.gbps()), raw: rawCell, s3fs: s3Cell,
		target: fmt.Sprintf("≥ %.2f × s3fs", targetColdVsS3fs), cpu: perGB(cold.daemon, cold.bytes)},
		cold.gbps()/s3.gbps(), true, targetColdVsS3fs, orNo(s3err))
	vsRaw := cold.gbps() / best.gbps()
	b.judge(row{scenario: "1 GiB cold sequential, dd bs=1M: vs the best raw parallel GET", pinfs: gbs(cold.gbps()), raw: rawCell, s3fs: s3Cell,
		target: fmt.Sprintf("≥ %.2f × raw (long-term %.2f: %s)", targetColdVsRaw, targetColdVsRawLongTerm, yesNo(vsRaw >= targetColdVsRawLongTerm)),
		cpu:    perGB(cold.daemon, cold.bytes)}, vsRaw, true, targetColdVsRaw, "")
	b.judge(row{scenario: "1 GiB warm re-read, same mount (best of 3)", pinfs: gbs(warm.gbps()),
		other: gbs(b.pageCache) + " (local file, page cache, best of 3)", target: fmt.Sprintf("≥ %.2f × page cache", targetWarmVsPageCache),
		cpu: perGB(warm.daemon, warm.bytes)}, warm.gbps()/b.pageCache, true, targetWarmVsPageCache, "")

	// Disk cache: new mounts on the same cache dir with the store down.
	// b3sum hashes the same bytes from the same state: first with the
	// block files in the page cache (the verification limit the target
	// names), then with the page cache dropped before each (report only:
	// the disk's read speed comes in).
	b.s.Stop()
	t.Cleanup(func() { b.s.Restart(t) }) // no-op when already running
	disk := b.diskRemount(t, "page cache", storeURL, cache, false)
	b.diskRate = disk.gbps()
	r := row{scenario: "1 GiB from the disk cache, new mount, store stopped (block files in the page cache)", pinfs: gbs(disk.gbps()),
		b3sum: b3sumCell(b.b3sum, b.b3sumErr), other: gbs(b.pageCache) + " (page cache, for reference)",
		target: fmt.Sprintf("≥ %.2f × b3sum", targetDiskVsB3sum), cpu: perGB(disk.daemon, disk.bytes)}
	b.judge(r, disk.gbps()/b.b3sum, true, targetDiskVsB3sum, orNo(b.b3sumErr))
	coldDisk := b.diskRemount(t, "page cache dropped", storeURL, cache, true)
	dropCaches(t)
	coldB3, coldErr := b.b3sumOnce(t, "page cache dropped")
	b.infoRow(row{scenario: "1 GiB from the disk cache, new mount, store stopped, page cache dropped", pinfs: gbs(coldDisk.gbps()),
		b3sum: b3sumCell(coldB3, coldErr) + ", page cache dropped", ratio: fmt.Sprintf("%.2f", coldDisk.gbps()/coldB3),
		cpu: perGB(coldDisk.daemon, coldDisk.bytes)})
	b.s.Restart(t)
}

// diskRemount mounts the 1 GiB member on cache with the store stopped
// (cache-mem 64MiB, so the memory tier cannot hold it), reads it once and
// unmounts; drop drops the page cache before the read. A network fetch
// is an error: every block must come from the disk tier.
func (b *bench) diskRemount(t *testing.T, state, storeURL, cache string, drop bool) measure {
	t.Helper()
	m := b.mount(t, "1 GiB from the disk cache, store stopped, "+state+" (cache-mem 64MiB, cache-disk 4GiB)", b.env, b.bigDigest, storeURL, cache,
		"--cache-mem", "64MiB", "--cache-disk", "4GiB")
	if drop {
		dropCaches(t)
	}
	got := b.dd(t, "pinfs 1 GiB from the disk cache, store stopped, "+state, filepath.Join(m.dir, bigMember), m.pid, bigSize)
	if tot := b.finish(t, m); tot != nil && tot["network_fetches"] != 0 {
		t.Errorf("disk-cache mount (%s) made %d network fetches with the store stopped", state, tot["network_fetches"])
	}
	return got
}

// s3fsBig reads the 1 GiB object cold through a fresh s3fs mount of
// data:/big as conf says (page cache dropped, server warmed as for every
// S3 read); name starts its measurement's name and its notes.
func (b *bench) s3fsBig(t *testing.T, conf s3fsConf, name string) (measure, error) {
	sm, err := b.mountS3fsConf(t, conf, "data", "big")
	if err != nil {
		b.note("%s: %v", name, err)
		return measure{}, err
	}
	defer sm.unmount(t)
	dropCaches(t)
	b.warmServer(t, b.bigObj())
	m, err := b.ddTry(t, name+" sequential (dd bs=1M; daemon CPU = s3fs)", filepath.Join(sm.dir, "big.bin"), sm.pid, bigSize)
	if err != nil {
		b.note("%s: %v", name, err)
		return measure{}, fmt.Errorf("s3fs read failed: %v", err)
	}
	return m, nil
}

// b3sumRate hashes the local 1 GiB file (in the page cache) with
// `b3sum --num-threads 2`, best of three, and returns GB/s.
func (b *bench) b3sumRate(t *testing.T) (float64, error) {
	best := 0.0
	for i := range 3 {
		rate, err := b.b3sumOnce(t, fmt.Sprintf("page cache, run %d", i+1))
		if err != nil {
			return math.NaN(), err
		}
		best = max(best, rate)
	}
	return best, nil
}

// b3sumOnce hashes the local 1 GiB file once with `b3sum --num-threads 2`
// and returns GB/s; state names the cache state in the CPU table.
func (b *bench) b3sumOnce(t *testing.T, state string) (float64, error) {
	s0 := b.sample(0)
	r := run(5*time.Minute, nil, "b3sum", "--num-threads", "2", b.localFile)
	if r.err != nil {
		err := fmt.Errorf("b3sum: %v: %s", r.err, firstLine(r.stderr))
		b.note("b3sum baseline: %v (make bench-deps installs b3sum)", err)
		return math.NaN(), err
	}
	m := b.done("b3sum --num-threads 2 of the local 1 GiB file ("+state+")", s0, 0, bigSize, r.cpu)
	m.wall = r.wall
	b.cpu[len(b.cpu)-1] = m
	if !b.b3sumShown {
		b.b3sumShown = true
		b.note("b3sum --num-threads 2: %s", strings.TrimSpace(r.stdout))
	}
	return m.gbps(), nil
}

// b3sumCell is the b3sum column: the rate or why there is none.
func b3sumCell(rate float64, err error) string {
	if err != nil {
		return "not run: " + err.Error()
	}
	return gbs(rate) + " (--num-threads 2)"
}

// orNo is err's text, or "" for nil.
func orNo(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
