package bench

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/verifytest"
)

const millionMembers = 1_000_000

// writeSyntheticSnapshot writes a member table of n CAS members (whose
// objects do not exist) and its manifest into a local store directory and
// returns the manifest digest. Paths: 95% train, 5% val, 1000 samples
// per shard directory; sizes 50–150 KB; random BLAKE3 digests.
func writeSyntheticSnapshot(t *testing.T, dir string, n int) (verify.Digest, int64, int) {
	t.Helper()
	r := rand.New(rand.NewChaCha8([32]byte{4}))
	ms := make([]verify.Member, n)
	trainShards := n / 1000 * 95 / 100
	var sum [32]byte
	for i := range ms {
		shard, split := i/1000, "train"
		if shard >= trainShards {
			shard, split = shard-trainShards, "val"
		}
		p := fmt.Sprintf("%s/shard-%04d/sample-%06d.jpg", split, shard, i)
		for k := range 4 {
			v := r.Uint64()
			for j := range 8 {
				sum[8*k+j] = byte(v >> (8 * j))
			}
		}
		d := "blake3:" + hex.EncodeToString(sum[:])
		ms[i] = verify.Member{ID: p, Path: p, Split: split, Size: 50_000 + r.Int64N(100_000), Digest: d, CAS: d}
	}
	st, err := localstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	d, total, tableLen, err := verifytest.PutSnapshot(context.Background(), st, ms, verify.Manifest{
		Sources:     []verify.Source{{ID: "synthetic", URI: "dir:synthetic-1m"}},
		SplitPolicy: "dir:train,val",
		Purpose:     "pinfs bench: synthetic member table",
	})
	if err != nil {
		t.Fatal(err)
	}
	return d, total, tableLen
}

// millionMembers is scenario 4: a manifest of 1,000,000 members.
func (b *bench) millionMembers(t *testing.T) {
	store := t.TempDir()
	t0 := time.Now()
	d, total, tableLen := writeSyntheticSnapshot(t, store, millionMembers)
	b.note("million members: wrote the member table (%d members, %.0f MB, %.0f GB of members) in %.1f s; it is in the page cache when mounted",
		millionMembers, float64(tableLen)/1e6, float64(total)/1e9, time.Since(t0).Seconds())

	cache := t.TempDir()
	m := b.mount(t, "1,000,000 members, find", nil, string(d), store, cache)
	b.limit("1M members: mount ready (background `pinfs mount`, fresh cache dir)", m.ready.Seconds(), 3, "s", "—")
	rssMounted := procStatus(m.pid, "VmRSS")

	s0 := b.sample(m.pid)
	r := run(5*time.Minute, nil, "sh", "-c", "find "+m.dir+" -type f | wc -l")
	if r.err != nil {
		t.Fatalf("find: %v\n%s", r.err, r.stderr)
	}
	fm := b.done("find MNT -type f | wc -l, 1M members", s0, m.pid, 0, r.cpu)
	fm.wall = r.wall
	b.cpu[len(b.cpu)-1] = fm
	count, _ := strconv.Atoi(strings.TrimSpace(r.stdout))
	b.limit(fmt.Sprintf("1M members: `find MNT -type f | wc -l` (counted %d)", count), r.wall.Seconds(), 10, "s", "—")
	if count != millionMembers {
		b.rows[len(b.rows)-1].holds = "no (count)"
		t.Errorf("find counted %d files, want %d", count, millionMembers)
	}
	rss, hwm := procStatus(m.pid, "VmRSS"), procStatus(m.pid, "VmHWM")
	b.limit("1M members: daemon RSS after the listing (VmRSS)", float64(rss)/1e6, 400, "MB", "—")
	b.info("1M members: daemon peak RSS (VmHWM)", mb(hwm), "—", "—", "report only", "—")
	b.note("million members: daemon RSS %s right after the mount, %s after find, peak %s; find used %.2f s CPU in the daemon, %.2f s in find/wc",
		mb(rssMounted), mb(rss), mb(hwm), fm.daemon, fm.reader)

	s0 = b.sample(m.pid)
	r2 := run(5*time.Minute, nil, "sh", "-c", "find "+m.dir+" -type f | wc -l")
	if r2.err == nil {
		m2 := b.done("find again (kernel entries cached), 1M members", s0, m.pid, 0, r2.cpu)
		m2.wall = r2.wall
		b.cpu[len(b.cpu)-1] = m2
		b.info("1M members: second `find` in the same mount", fmt.Sprintf("%.2f s", r2.wall.Seconds()), "—", "—", "report only", "—")
	}
	b.finish(t, m)

	// A remount finds the verified metadata in the cache dir.
	m3 := b.mount(t, "1,000,000 members, remount (metadata cached)", nil, string(d), store, cache)
	b.info("1M members: remount, same cache dir (verified metadata cached)", fmt.Sprintf("%.2f s", m3.ready.Seconds()), "—", "—", "report only", "—")
	b.finish(t, m3)

	vr := run(5*time.Minute, nil, b.bin, "verify", string(d), "--store", store, "--no-head")
	if vr.err != nil {
		t.Errorf("pinfs verify --no-head: %v\n%s%s", vr.err, vr.stdout, vr.stderr)
	}
	b.limit("1M members: `pinfs verify --no-head`", vr.wall.Seconds(), 5, "s", "—")
	b.note("million members: pinfs verify --no-head used %.2f s CPU in %.2f s", vr.cpu, vr.wall.Seconds())
}

// fourGiB is scenario 5: read a 4 GiB member with --cache-mem 256MiB and
// watch the daemon's RSS.
func (b *bench) fourGiB(t *testing.T) {
	const size = 4 << 30
	const cacheMem = 256 << 20
	src := t.TempDir()
	pattern := make([]byte, 64<<20)
	rand.NewChaCha8([32]byte{5}).Read(pattern)
	f, err := os.Create(filepath.Join(src, "big4g.bin"))
	if err != nil {
		t.Fatal(err)
	}
	for range size / len(pattern) {
		if _, err := f.Write(pattern); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	pattern = nil
	store := t.TempDir()
	d := b.pin(t, src, store, nil, "4 GiB local file (a 64 MiB random pattern repeated) into a local store")
	os.RemoveAll(src)

	cache := t.TempDir()
	m := b.mount(t, "4 GiB member, cache-mem 256MiB", nil, d, store, cache, "--cache-mem", "256MiB")
	idle := procStatus(m.pid, "VmRSS")
	dropCaches(t)

	var mu sync.Mutex
	var series []int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				v := procStatus(m.pid, "VmRSS")
				mu.Lock()
				series = append(series, v)
				mu.Unlock()
			}
		}
	})
	dm := b.dd(t, "pinfs 4 GiB member, local store, cache-mem 256MiB", filepath.Join(m.dir, "big4g.bin"), m.pid, size)
	close(stop)
	wg.Wait()
	hwm, rss := procStatus(m.pid, "VmHWM"), procStatus(m.pid, "VmRSS")
	b.info("4 GiB member via dd, --cache-mem 256MiB: daemon peak RSS (VmHWM)", mb(hwm), "--cache-mem "+mb(cacheMem),
		fmt.Sprintf("%.2f", float64(hwm)/cacheMem), "≤ cache-mem + fixed overhead (none documented yet)", perGB(dm.daemon, dm.bytes))
	b.info("4 GiB member: fixed overhead = peak RSS − cache-mem", mb(hwm-cacheMem), "idle RSS after mount "+mb(idle), "—", "report only", "—")
	var pts []string
	for _, q := range []int{1, 2, 3, 4} {
		if len(series) > 0 {
			pts = append(pts, fmt.Sprintf("%d%%: %s", 25*q, mb(series[min(len(series)-1, len(series)*q/4)])))
		}
	}
	b.note("4 GiB member: daemon RSS during the read (by elapsed time) %s; after the read %s; read at %.3f GB/s",
		strings.Join(pts, ", "), mb(rss), dm.gbps())
	b.finish(t, m)
}
