package bench

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// warmJobs is `pinfs warm --jobs` for the small files: the raw client's
// parallelism in the baseline it is held to (smallReaders GETs at a time).
const warmJobs = smallReaders

// warm is scenario 3: `pinfs warm` of the 2000 small members and of the
// 1 GiB member into fresh cache dirs (page cache dropped, server warmed),
// against the raw client fetching the same objects; then a mount on each
// warmed cache dir reads everything, which must need no network fetch.
func (b *bench) warm(t *testing.T) {
	smallRow := row{scenario: fmt.Sprintf("`pinfs warm` 2000 × 256 KiB, --jobs %d (time; CPU = the warm process)", warmJobs),
		raw:    fmt.Sprintf("%s (%d GETs at a time, best of 2)", secs(b.rawSmall16.wall), smallReaders),
		target: fmt.Sprintf("≤ %.2f × raw", targetWarmSmallVsRaw)}
	bigRow := row{scenario: "`pinfs warm` of the 1 GiB member (rate; CPU = the warm process)",
		raw: gbs(b.rawBest) + " (best raw parallel GET)", target: fmt.Sprintf("≥ %.2f × raw", targetWarmBigVsRaw)}
	if !b.hasWarm {
		why := "this pinfs has no `warm` command"
		b.notRun(smallRow, why)
		b.notRun(bigRow, why)
		b.note("warm: %s (bin/pinfs warm --help does not list --cache-dir)", why)
		return
	}

	cache := t.TempDir()
	dropCaches(t)
	b.warmServer(t, b.small...)
	wm, err := b.runWarm(t, b.env, smallRow.scenario, b.smallDigest, cache, smallCount*smallSize, "--jobs", strconv.Itoa(warmJobs))
	if err != nil {
		b.notRun(smallRow, err.Error())
	} else {
		smallRow.pinfs, smallRow.cpu = secs(wm.wall), perGB(wm.reader, wm.bytes)
		b.judge(smallRow, wm.wall.Seconds()/b.rawSmall16.wall.Seconds(), false, targetWarmSmallVsRaw, "no raw baseline")
		m := b.mount(t, "2000 × 256 KiB after pinfs warm, 16 readers", b.env, b.smallDigest, storeURL, cache)
		dropCaches(t)
		s0 := b.sample(m.pid)
		inOrder := make([]int, smallCount)
		for i := range inOrder {
			inOrder[i] = i
		}
		if err := b.readThreads(m.dir, inOrder, smallReaders); err != nil {
			t.Fatalf("reading the warmed mount: %v", err)
		}
		rm := b.done("pinfs 2000 × 256 KiB after pinfs warm, 16 readers", s0, m.pid, smallCount*smallSize, -1)
		tot := b.finish(t, m)
		b.infoRow(row{scenario: "2000 × 256 KiB, 16 readers, new mount on the warmed cache dir (time)",
			pinfs: secs(rm.wall) + fetched(tot), raw: secs(b.rawSmall16.wall), cpu: perGB(rm.daemon, rm.bytes),
			ratio: fmt.Sprintf("%.2f (to raw)", rm.wall.Seconds()/b.rawSmall16.wall.Seconds())})
	}

	cache = t.TempDir()
	dropCaches(t)
	b.warmServer(t, b.bigObj())
	wb, err := b.runWarm(t, b.env, bigRow.scenario, b.bigDigest, cache, bigSize, "--cache-disk", "4GiB")
	if err != nil {
		b.notRun(bigRow, err.Error())
		return
	}
	bigRow.pinfs, bigRow.cpu = gbs(wb.gbps()), perGB(wb.reader, wb.bytes)
	b.judge(bigRow, wb.gbps()/b.rawBest, true, targetWarmBigVsRaw, "no raw baseline")
	m := b.mount(t, "1 GiB after pinfs warm", b.env, b.bigDigest, storeURL, cache, "--cache-mem", "64MiB", "--cache-disk", "4GiB")
	dropCaches(t)
	dm := b.dd(t, "pinfs 1 GiB after pinfs warm, new mount (dd bs=1M)", filepath.Join(m.dir, bigMember), m.pid, bigSize)
	tot := b.finish(t, m)
	b.infoRow(row{scenario: "1 GiB, new mount on the warmed cache dir (dd bs=1M)", pinfs: gbs(dm.gbps()) + fetched(tot),
		b3sum: gbs(b.b3sum), other: gbs(b.diskRate) + " (disk-cache remount, scenario 1)", cpu: perGB(dm.daemon, dm.bytes),
		ratio: fmt.Sprintf("%.2f (to the disk-cache remount)", dm.gbps()/b.diskRate)})
}

// runWarm runs `pinfs warm DIGEST --store --cache-dir cache --quiet extra…`
// with env as a measurement of bytes and returns it (reader CPU = the warm
// process).
func (b *bench) runWarm(t *testing.T, env []string, name, digest, cache string, bytes int64, extra ...string) (measure, error) {
	t.Helper()
	args := append([]string{"warm", digest, "--store", storeURL, "--cache-dir", cache, "--quiet"}, extra...)
	s0 := b.sample(0)
	r := run(10*time.Minute, env, b.bin, args...)
	if r.err != nil {
		err := fmt.Errorf("pinfs warm failed: %v: %s", r.err, firstLine(r.stderr))
		b.note("%s: %v", name, err)
		return measure{}, err
	}
	m := b.done(name, s0, 0, bytes, r.cpu)
	m.wall = r.wall
	b.cpu[len(b.cpu)-1] = m
	t.Logf("%s: %.2f s, %.3f GB/s, %.2f s CPU", name, r.wall.Seconds(), m.gbps(), r.cpu)
	return m, nil
}

// fetched notes network fetches in a mount that should have made none.
func fetched(tot map[string]int64) string {
	switch {
	case tot == nil:
		return " (run_end missing)"
	case tot["network_fetches"] > 0:
		return fmt.Sprintf(" (**%d network fetches**: not all warmed)", tot["network_fetches"])
	}
	return " (0 network fetches)"
}
