package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	randBS      = 256 << 10
	randJobs    = 4
	randRuntime = 15 * time.Second
)

// fioResult is what we read from fio's JSON output (group_reporting).
type fioResult struct {
	iops    float64
	p99     time.Duration
	ioBytes int64
}

// fio runs a randread job against path and parses IOPS and clat p99.
func (b *bench) fio(t *testing.T, name, path string, daemonPid int, extra ...string) (fioResult, measure) {
	t.Helper()
	args := append([]string{
		"--name=randread", "--filename=" + path, "--readonly", "--rw=randread",
		"--bs=256k", "--numjobs=" + strconv.Itoa(randJobs), "--direct=0", "--ioengine=psync",
		"--size=" + strconv.Itoa(bigSize), "--group_reporting", "--output-format=json",
	}, extra...)
	s0 := b.sample(daemonPid)
	r := run(randRuntime+2*time.Minute, nil, "fio", args...)
	if r.err != nil {
		t.Fatalf("fio %s: %v\n%s%s", strings.Join(args, " "), r.err, r.stdout, r.stderr)
	}
	var out struct {
		Jobs []struct {
			Read struct {
				IOBytes int64   `json:"io_bytes"`
				IOPS    float64 `json:"iops"`
				Clat    struct {
					Percentile map[string]float64 `json:"percentile"`
				} `json:"clat_ns"`
			} `json:"read"`
			Error int `json:"error"`
		} `json:"jobs"`
	}
	js := r.stdout
	if i := strings.IndexByte(js, '{'); i > 0 {
		js = js[i:] // fio may print warnings first
	}
	if err := json.Unmarshal([]byte(js), &out); err != nil || len(out.Jobs) == 0 {
		t.Fatalf("fio output: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	j := out.Jobs[0]
	if j.Error != 0 {
		t.Fatalf("fio job error %d\n%s", j.Error, r.stderr)
	}
	res := fioResult{iops: j.Read.IOPS, ioBytes: j.Read.IOBytes, p99: time.Duration(j.Read.Clat.Percentile["99.000000"])}
	m := b.done(name, s0, daemonPid, res.ioBytes, r.cpu)
	t.Logf("%s: %.0f IOPS, p99 %v", name, res.iops, res.p99)
	return res, m
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// randomReads is scenario 3: fio randread 256 KiB, 4 jobs, cold and
// warm, next to raw ranged GETs of 256 KiB at random offsets.
func (b *bench) randomReads(t *testing.T) {
	b.requireTool(t, "fio", "fio")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	dropCaches(t)
	b.warmServer(t, b.bigObj())
	s0 := b.sample(0)
	lat, wall, err := randomGETs(ctx, b.client, "data", bigKey, b.bigVersion, bigSize, randBS, randJobs, randRuntime)
	if err != nil {
		t.Fatalf("raw random GETs: %v", err)
	}
	rm := b.done("raw ranged GET 256 KiB at random offsets, 4 workers, 15 s", s0, 0, int64(len(lat))*randBS, -1)
	rawIOPS := float64(len(lat)) / wall.Seconds()
	rawP99 := percentile(lat, 99)
	base := fmt.Sprintf("raw GET: %.0f IOPS, p99 %s", rawIOPS, ms(rawP99))
	t.Logf("%s (%d requests in %v; client CPU %.2f s)", base, len(lat), wall, rm.reader)

	cache := t.TempDir()
	m := b.mount(t, "fio randread cold + warm", b.env, b.bigDigest, storeURL, cache)
	file := filepath.Join(m.dir, bigMember)
	dropCaches(t)
	b.warmServer(t, b.bigObj())
	timed := []string{"--time_based", "--runtime=" + strconv.Itoa(int(randRuntime.Seconds()))}
	// The first run starts cold (fresh mount, page cache dropped) but
	// after its first pass over the object is served from pinfs's caches:
	// a mixed run, not comparable with raw GETs that each go to the
	// server, so its rows have no ratio. The `first 256 reads` row below
	// measures cold reads cold.
	for _, c := range []struct {
		name  string
		extra []string
	}{
		{"fio randread 256 KiB ×4, 15 s, mixed run: starts cold, then mostly from pinfs's caches", timed},
		{"fio randread 256 KiB ×4, 15 s, warm (fio drops the file's page cache: pinfs caches)", timed},
		{"fio randread 256 KiB ×4, 15 s, warm, page cache kept (--invalidate=0)", append(timed, "--invalidate=0")},
	} {
		res, fm := b.fio(t, "pinfs "+c.name, file, m.pid, c.extra...)
		b.infoRow(row{scenario: c.name, pinfs: fmt.Sprintf("%.0f IOPS, p99 %s", res.iops, ms(res.p99)), raw: base,
			ratio: "— (mixed/warm: not comparable)", cpu: perGB(fm.daemon, fm.bytes)})
	}
	tot := b.finish(t, m)
	if tot != nil {
		b.note("random reads: the mixed 15 s fio run and the two warm ones fetched %d of the object's %d blocks from the store and served %d block reads from the memory tier and %d from the disk tier: after the first pass, the mixed run reads pinfs's caches",
			tot["network_fetches"], bigSize>>20, tot["mem_hits"], tot["disk_hits"])
	}

	// Truly cold: 64 reads per job (256 reads of 256 KiB touch at most 256
	// of the 1024 blocks) in a fresh mount.
	m2 := b.mount(t, "fio randread, first 256 reads cold", b.env, b.bigDigest, storeURL, t.TempDir())
	dropCaches(t)
	b.warmServer(t, b.bigObj())
	name := "fio randread 256 KiB ×4, cold throughout: first 256 reads (64 per job), fresh mount"
	res, fm := b.fio(t, "pinfs "+name, filepath.Join(m2.dir, bigMember), m2.pid, "--number_ios=64")
	b.infoRow(row{scenario: name, pinfs: fmt.Sprintf("%.0f IOPS, p99 %s", res.iops, ms(res.p99)), raw: base,
		ratio: fmt.Sprintf("%.2f (IOPS)", res.iops/rawIOPS), cpu: perGB(fm.daemon, fm.bytes)})
	b.finish(t, m2)
}
