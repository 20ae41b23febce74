package bench

import (
	"context"
	"encoding/hex"
	"fmt"
	"math"
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

// syntheticMembers returns a member table of n CAS members (whose objects
// do not exist). Paths: 95% train, 5% val, 1000 samples per shard
// directory; sizes 50–150 KB; random BLAKE3 digests.
func syntheticMembers(n int) []verify.Member {
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
	return ms
}

// syntheticManifest is the manifest of the synthetic snapshot.
var syntheticManifest = verify.Manifest{
	Sources:     []verify.Source{{ID: "synthetic", URI: "dir:synthetic-1m"}},
	SplitPolicy: "dir:train,val",
	Purpose:     "pinfs bench: synthetic member table",
}

// writeSyntheticSnapshot writes the synthetic snapshot of n members into
// st and returns its digest, the members' total size and the table length.
func writeSyntheticSnapshot(t *testing.T, st verifytest.Putter, n int) (verify.Digest, int64, int) {
	t.Helper()
	d, total, tableLen, err := verifytest.PutSnapshot(context.Background(), st, syntheticMembers(n), syntheticManifest)
	if err != nil {
		t.Fatal(err)
	}
	return d, total, tableLen
}

// localStore opens a local store in a new temporary directory.
func localStore(t *testing.T) (string, *localstore.Store) {
	t.Helper()
	dir := t.TempDir()
	st, err := localstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, st
}

// teeStore puts every blob into a local store and under prefix in the
// bench's S3 store bucket, and remembers the S3 versions written.
type teeStore struct {
	b        *bench
	local    *localstore.Store
	prefix   string
	versions []smallObj
}

func (s *teeStore) Put(ctx context.Context, key string, data []byte) error {
	if err := s.local.Put(ctx, key, data); err != nil {
		return err
	}
	v, err := put(ctx, s.b.client, "store", s.prefix+key, data)
	s.versions = append(s.versions, smallObj{key: s.prefix + key, version: v})
	return err
}

// millionMembers is scenario 5: a manifest of 1,000,000 members. The
// targets hold for the realistic case: manifest and member table on the S3
// store, page cache dropped before mounting, fresh cache dir. The local
// store whose table was just written (in the page cache) is report only.
func (b *bench) millionMembers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir, local := localStore(t)
	tee := &teeStore{b: b, local: local, prefix: "m1/"}
	s3URL := "s3://store/" + strings.TrimSuffix(tee.prefix, "/")
	t0 := time.Now()
	d, total, tableLen, err := verifytest.PutSnapshot(ctx, tee, syntheticMembers(millionMembers), syntheticManifest)
	if err != nil {
		t.Fatal(err)
	}
	b.note("million members: wrote the member table (%d members, %.0f MB, %.0f GB of members) and manifest to a local store and to %s in %.1f s",
		millionMembers, float64(tableLen)/1e6, float64(total)/1e9, s3URL, time.Since(t0).Seconds())

	// S3 store, page cache dropped (the server's copy read back in, as
	// for every S3 measurement), fresh cache dir.
	dropCaches(t)
	b.warmBucket(t, "store", tee.versions...)
	cache := t.TempDir()
	m := b.mount(t, "1,000,000 members on S3, find", b.env, string(d), s3URL, cache)
	rssMounted, hwmMounted := procStatus(m.pid, "VmRSS"), procStatus(m.pid, "VmHWM")
	b.limitRow(row{scenario: "1M members, S3 store, page cache dropped, fresh cache dir: `pinfs mount` until it serves", cpu: "—"},
		m.ready.Seconds(), targetMillionMountS, "s")
	fm, count := b.find(t, m, "find MNT -type f | wc -l, 1M members (S3 store)")
	b.limit(fmt.Sprintf("1M members, S3 store: `find MNT -type f | wc -l` (counted %d)", count), fm.wall.Seconds(), limitFindS, "s", "—")
	if count != millionMembers {
		b.rows[len(b.rows)-1].verdict = "no (count)"
		t.Errorf("find counted %d files, want %d", count, millionMembers)
	}
	rss, hwm := procStatus(m.pid, "VmRSS"), procStatus(m.pid, "VmHWM")
	b.limitRow(row{scenario: "1M members, S3 store: daemon peak RSS (VmHWM) through mount and find", pinfs: mb(hwm), cpu: "—"},
		float64(hwm)/1e6, targetMillionRSSMB, "MB")
	b.info("1M members, S3 store: daemon RSS after the listing (VmRSS)", mb(rss), "", "", "", "—")
	b.note("million members (S3 store): daemon RSS %s and peak %s right after the mount, %s after find, peak %s; find used %.2f s CPU in the daemon, %.2f s in find/wc",
		mb(rssMounted), mb(hwmMounted), mb(rss), mb(hwm), fm.daemon, fm.reader)
	if _, c2 := b.find(t, m, "find again (kernel entries cached), 1M members (S3 store)"); c2 == millionMembers {
		b.info("1M members, S3 store: second `find` in the same mount", secs(b.cpu[len(b.cpu)-1].wall), "", "", "", "—")
	}
	b.finish(t, m)
	m3 := b.mount(t, "1,000,000 members on S3, remount (metadata cached)", b.env, string(d), s3URL, cache)
	b.info("1M members, S3 store: remount, same cache dir (verified metadata cached)", secs(m3.ready), "", "", "", "—")
	b.finish(t, m3)

	// Local store, table just written (in the page cache): report only.
	ml := b.mount(t, "1,000,000 members, local store, find", nil, string(d), dir, t.TempDir())
	b.info("1M members, local store (table in the page cache), fresh cache dir: `pinfs mount` until it serves", secs(ml.ready), "", "", "", "—")
	b.find(t, ml, "find MNT -type f | wc -l, 1M members (local store)")
	b.info("1M members, local store: daemon peak RSS (VmHWM) through mount and find", mb(procStatus(ml.pid, "VmHWM")), "", "", "", "—")
	b.finish(t, ml)

	vr := run(5*time.Minute, nil, b.bin, "verify", string(d), "--store", dir, "--no-head")
	if vr.err != nil {
		t.Errorf("pinfs verify --no-head: %v\n%s%s", vr.err, vr.stdout, vr.stderr)
	}
	b.limit("1M members, local store: `pinfs verify --no-head`", vr.wall.Seconds(), limitVerifyHeadS, "s", "—")
	b.note("million members: pinfs verify --no-head used %.2f s CPU in %.2f s", vr.cpu, vr.wall.Seconds())
}

// find runs `find MNT -type f | wc -l` as a measurement and returns it
// and the count.
func (b *bench) find(t *testing.T, m *mount, name string) (measure, int) {
	t.Helper()
	s0 := b.sample(m.pid)
	r := run(5*time.Minute, nil, "sh", "-c", "find "+m.dir+" -type f | wc -l")
	if r.err != nil {
		t.Fatalf("find: %v\n%s", r.err, r.stderr)
	}
	fm := b.done(name, s0, m.pid, 0, r.cpu)
	fm.wall = r.wall
	b.cpu[len(b.cpu)-1] = fm
	count, _ := strconv.Atoi(strings.TrimSpace(r.stdout))
	return fm, count
}

// fourGiB is scenario 7: read a 4 GiB member with --cache-mem 256MiB and
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
	lim := math.Round(float64(cacheMem)/1e6) + targetFourGiBOverheadMB
	b.limitRow(row{scenario: "4 GiB member via dd, --cache-mem 256MiB: daemon peak RSS (VmHWM)", pinfs: mb(hwm),
		other: fmt.Sprintf("--cache-mem %s + %d MB (docs/mount.md)", mb(cacheMem), targetFourGiBOverheadMB), cpu: perGB(dm.daemon, dm.bytes)},
		float64(hwm)/1e6, lim, "MB")
	b.info("4 GiB member: fixed overhead = peak RSS − cache-mem", mb(hwm-cacheMem), "idle RSS after mount "+mb(idle), "", "", "—")
	var pts []string
	for _, q := range []int{1, 2, 3, 4} {
		if len(series) > 0 {
			pts = append(pts, fmt.Sprintf("%d%%: %s", 25*q, mb(series[min(len(series)-1, len(series)*q/4)])))
		}
	}
	b.note("4 GiB member: daemon RSS during the read (by elapsed time) %s; after the read %s; read at %.3f GB/s",
		strings.Join(pts, ", "), mb(rss), dm.gbps())
	b.finish(t, m)
	b.fourGiBVs1GiB(t, dm)
}
