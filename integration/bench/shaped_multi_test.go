package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The fixture of the shaped 16-reader row: 16 objects of 256 MiB of
// random bytes under data/multi/, pinned as one snapshot.
const (
	multiCount = 16
	multiSize  = 256 << 20
	multiMem   = "256MiB" // --cache-mem of the row's mount
	multiMemB  = 256 << 20
)

// multiStreams are the raw client's concurrencies for the 16 objects.
var multiStreams = []int{16, 32}

// setupMulti puts the 16 × 256 MiB objects with the raw client (on
// loopback, not through the proxy: setup is not measured) and pins them.
func (sh *shapedRun) setupMulti(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sh.multi = make([]smallObj, multiCount)
	t0 := time.Now()
	err := parallel(multiCount, 4, func(i int, _ []byte) error {
		m := fmt.Sprintf("m-%02d.bin", i)
		data := make([]byte, multiSize)
		rand.NewChaCha8([32]byte{3, byte(i)}).Read(data)
		v, err := put(ctx, sh.bench.client, "data", "multi/"+m, data)
		sh.multi[i] = smallObj{key: "multi/" + m, member: m, version: v}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sh.note("setup: PUT of 16 × 256 MiB (4 in parallel, loopback) took %.1f s", time.Since(t0).Seconds())
	sh.multiDigest = sh.pin(t, "s3://data/multi/", storeURL, sh.bench.env, "16 × 256 MiB")
}

// multiReaders: 16 dd bs=1M at once, each reading a different 256 MiB
// member of a new mount (--cache-mem 256MiB), against the raw client's
// best parallel GET of the same 16 objects in 8 MiB parts; and the
// daemon's peak RSS against --cache-mem + the readahead budget + 100 MB.
func (sh *shapedRun) multiReaders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const part = 8 << 20
	const parts = multiSize / part
	const total = multiCount * multiSize
	best, bestStreams := measure{}, 0
	for _, streams := range multiStreams {
		sh.warmBucket(t, "data", sh.multi...)
		s0 := sh.sample(0)
		err := parallel(multiCount*parts, streams, func(i int, buf []byte) error {
			o := sh.multi[i/parts]
			_, err := getRange(ctx, sh.client, "data", o.key, o.version, int64(i%parts)*part, part, buf)
			return err
		})
		if err != nil {
			t.Fatalf("raw GET of the 16 objects, %d streams: %v", streams, err)
		}
		m := sh.done(fmt.Sprintf("shaped: raw parallel GET 16 × 256 MiB, 8 MiB parts, %d streams", streams), s0, 0, total, -1)
		if bestStreams == 0 || m.gbps() > best.gbps() {
			best, bestStreams = m, streams
		}
	}
	rawCell := fmt.Sprintf("%s (8 MiB parts, %d at a time; best of 16/32)", gbs(best.gbps()), bestStreams)

	name := "shaped: 16 sequential readers of 16 × 256 MiB members at once (cache-mem " + multiMem + ")"
	m := sh.mount(t, name, sh.env, sh.multiDigest, storeURL, t.TempDir(), "--cache-mem", multiMem)
	sh.warmBucket(t, "data", sh.multi...)
	s0 := sh.sample(m.pid)
	wall, cpu, err := ddAll(m.dir, sh.multi)
	if err != nil {
		t.Fatalf("reading the mount: %v", err)
	}
	pm := sh.done("pinfs "+name+" (16 × dd bs=1M)", s0, m.pid, total, cpu)
	pm.wall = wall
	sh.cpu[len(sh.cpu)-1] = pm
	hwm := procStatus(m.pid, "VmHWM")
	sh.finish(t, m)

	sh.judge(row{scenario: "shaped: 16 sequential readers (dd bs=1M) of 16 different 256 MiB members at once: aggregate rate", pinfs: gbs(pm.gbps()),
		raw: rawCell, s3fs: "not run (the issue's table has no s3fs figure for it)", target: fmt.Sprintf("≥ %.2f × raw", targetShapedMultiVsRaw), cpu: perGB(pm.daemon, pm.bytes)},
		pm.gbps()/best.gbps(), true, targetShapedMultiVsRaw, "")
	budget, budgetText := sh.readaheadBudget()
	limitMB := math.Round(float64(multiMemB+budget)/1e6) + targetShapedMultiRSSOverheadMB
	sh.limitRow(row{scenario: "shaped: the same 16 readers: daemon peak RSS (VmHWM)", pinfs: mb(hwm),
		other: fmt.Sprintf("--cache-mem %s + readahead budget %s + %d MB", mb(multiMemB), budgetText, targetShapedMultiRSSOverheadMB),
		cpu:   perGB(pm.daemon, pm.bytes)}, float64(hwm)/1e6, limitMB, "MB")
}

// ddAll runs one dd bs=1M per object's member in dir, all at once, and
// returns the wall time from the first start to the last exit and the dd
// processes' CPU seconds.
func ddAll(dir string, objs []smallObj) (time.Duration, float64, error) {
	var wg sync.WaitGroup
	res := make([]cmdResult, len(objs))
	start := time.Now()
	for i, o := range objs {
		wg.Go(func() {
			res[i] = run(10*time.Minute, nil, "dd", "if="+filepath.Join(dir, o.member), "of=/dev/null", "bs=1M")
		})
	}
	wg.Wait()
	wall := time.Since(start)
	var cpu float64
	for i, r := range res {
		cpu += r.cpu
		if r.err != nil {
			return wall, cpu, fmt.Errorf("dd %s: %v: %s", objs[i].member, r.err, firstLine(r.stderr))
		}
		if n := ddBytes(r.stderr); n != multiSize {
			return wall, cpu, fmt.Errorf("dd %s: read %d bytes, want %d", objs[i].member, n, multiSize)
		}
	}
	return wall, cpu, nil
}

// defaultRE finds pflag's "(default X)" in a flag's help line.
var defaultRE = regexp.MustCompile(`\(default "?([^)"]+)"?\)`)

// readaheadBudget returns the default of `pinfs mount --readahead-budget`
// in bytes and how the row names it; 0 when this pinfs has no such flag.
func (b *bench) readaheadBudget() (int64, string) {
	help := run(time.Minute, nil, b.bin, "mount", "--help")
	lines := strings.Split(help.stdout+help.stderr, "\n")
	for i, line := range lines {
		if !strings.Contains(line, "--readahead-budget") {
			continue
		}
		// The help wraps a flag's text: its entry runs to the next flag.
		entry := line
		for _, l := range lines[i+1:] {
			// A flag's line is indented a few spaces; its wrapped text
			// runs under the description column (which may begin "--").
			if t := strings.TrimLeft(l, " "); len(l)-len(t) < 10 {
				break
			}
			entry += " " + strings.TrimSpace(l)
		}
		m := defaultRE.FindStringSubmatch(entry)
		if m == nil {
			return 0, "0 (--readahead-budget shows no default)"
		}
		n, err := parseSize(m[1])
		if err != nil {
			return 0, fmt.Sprintf("0 (--readahead-budget default %q: %v)", m[1], err)
		}
		return n, fmt.Sprintf("%s (default of --readahead-budget, %s)", mb(n), m[1])
	}
	return 0, "0 (this pinfs has no --readahead-budget)"
}

// parseSize parses a size as pinfs's flags do: a number with an optional
// K, M, G or T (binary multiples, with or without "iB" or "B").
func parseSize(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(s), "B"), "i")
	shift := 0
	if n := len(t); n > 0 {
		if i := strings.IndexByte("KMGT", t[n-1]&^0x20); i >= 0 {
			shift, t = 10*(i+1), t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > (1<<62)>>shift {
		return 0, fmt.Errorf("%q is not a size like 512MiB", s)
	}
	return v << shift, nil
}
