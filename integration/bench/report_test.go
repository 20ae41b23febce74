package bench

import (
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// sample is the CPU time used so far by the processes a measurement
// involves.
type sample struct {
	t                    time.Time
	daemon, server, self float64 // CPU seconds
	proxy                float64 // CPU seconds of the shaping proxy (0 when none runs)
	busy, total          float64 // machine CPU seconds (all cores)
	procs                map[int]procTime
}

func (b *bench) sample(daemonPid int) sample {
	s := sample{t: time.Now(), self: selfCPU()}
	s.daemon, _ = procCPU(daemonPid)
	s.server, _ = procCPU(b.serverPid())
	s.proxy, _ = procCPU(b.proxyPid)
	s.busy, s.total = machineCPU()
	s.procs = procAll()
	return s
}

// measure is one timed read and the CPU it cost.
type measure struct {
	name   string
	bytes  int64
	wall   time.Duration
	daemon float64 // pinfs daemon CPU seconds
	reader float64 // dd / fio / find, or this process (raw client, parallel readers)
	server float64 // versitygw CPU seconds
	other  float64 // the rest of the machine's busy CPU seconds: kernel threads, other processes
	window time.Duration
	others string  // the processes outside the measurement that used the most CPU in it
	busy   float64 // fraction of all cores busy
}

// done ends a measurement started with sample s0. readerCPU < 0 means
// the reader is this process.
func (b *bench) done(name string, s0 sample, daemonPid int, bytes int64, readerCPU float64) measure {
	s1 := b.sample(daemonPid)
	m := measure{name: name, bytes: bytes, wall: s1.t.Sub(s0.t), window: s1.t.Sub(s0.t), reader: readerCPU}
	if daemonPid > 0 {
		m.daemon = s1.daemon - s0.daemon
	}
	if s1.server >= s0.server {
		m.server = s1.server - s0.server
	}
	self := s1.self - s0.self
	if readerCPU < 0 {
		m.reader, self = self, 0
	}
	if dt := s1.total - s0.total; dt > 0 {
		m.busy = (s1.busy - s0.busy) / dt
	}
	m.other = max(0, (s1.busy-s0.busy)-m.daemon-m.reader-m.server-self-(s1.proxy-s0.proxy))
	type use struct {
		name string
		cpu  float64
	}
	var uses []use
	me, server := os.Getpid(), b.serverPid()
	for pid, p1 := range s1.procs {
		if pid == me || pid == daemonPid || pid == server || pid == b.proxyPid {
			continue
		}
		p0 := s0.procs[pid] // zero for a process that started in the window
		if p0.comm != p1.comm {
			p0 = procTime{}
		}
		if d := p1.cpu - p0.cpu; d >= 0.05 {
			uses = append(uses, use{fmt.Sprintf("%s[%d]", p1.comm, pid), d})
		}
	}
	sort.Slice(uses, func(i, j int) bool { return uses[i].cpu > uses[j].cpu })
	var names []string
	for _, u := range uses[:min(3, len(uses))] {
		names = append(names, fmt.Sprintf("%s %.2f s", u.name, u.cpu))
	}
	m.others = strings.Join(names, ", ")
	b.cpu = append(b.cpu, m)
	return m
}

func (m measure) gbps() float64 { return float64(m.bytes) / 1e9 / m.wall.Seconds() }

// perGB returns CPU seconds per GB read ("—" when nothing was read).
func perGB(cpu float64, bytes int64) string {
	if bytes <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", cpu/(float64(bytes)/1e9))
}

// row is one line of the results table: pinfs and its baselines side by
// side (raw aws-sdk-go-v2, s3fs, b3sum, or another reference such as the
// page cache; "" prints as —), the ratio, the target of targets_test.go
// and the verdict.
type row struct {
	scenario, pinfs             string
	raw, s3fs, b3sum, other     string
	ratio, target, verdict, cpu string
}

// judge adds r with ratio (pinfs/baseline) held to target: at least it
// (atLeast) or at most it. A NaN ratio (no baseline) adds the row as not
// judged, with why.
func (b *bench) judge(r row, ratio float64, atLeast bool, target float64, why string) {
	op, ok := "≤", ratio <= target
	if atLeast {
		op, ok = "≥", ratio >= target
	}
	if r.target == "" {
		r.target = fmt.Sprintf("%s %.2f", op, target)
	}
	switch {
	case math.IsNaN(ratio) || math.IsInf(ratio, 0):
		r.ratio, r.verdict = "—", "not measured: "+why
	default:
		r.ratio, r.verdict = fmt.Sprintf("%.2f", ratio), yesNo(ok)
	}
	b.rows = append(b.rows, r)
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

// check adds a row with one baseline in the `other` column: ratio =
// pinfs/base must be >= (atLeast) or <= the target.
func (b *bench) check(scenario, pinfs, base string, ratio float64, atLeast bool, target float64, cpu string) {
	b.judge(row{scenario: scenario, pinfs: pinfs, other: base, cpu: cpu}, ratio, atLeast, target, "")
}

// limit adds a row with an absolute limit: v must be at most lim.
func (b *bench) limit(scenario string, v, lim float64, unit, cpu string) {
	b.limitRow(row{scenario: scenario, cpu: cpu}, v, lim, unit)
}

// limitRow adds r with pinfs = v held to at most lim.
func (b *bench) limitRow(r row, v, lim float64, unit string) {
	if r.pinfs == "" {
		r.pinfs = fmt.Sprintf("%.2f %s", v, unit)
	}
	r.target = fmt.Sprintf("≤ %g %s", lim, unit)
	r.ratio, r.verdict = fmt.Sprintf("%.2f", v/lim), yesNo(v <= lim)
	b.rows = append(b.rows, r)
}

// info adds a row without a target (base goes to the `other` column).
func (b *bench) info(scenario, pinfs, base, ratio, target, cpu string) {
	b.infoRow(row{scenario: scenario, pinfs: pinfs, other: base, ratio: ratio, target: target, cpu: cpu})
}

// infoRow adds r as report only: no target was fixed before measuring.
func (b *bench) infoRow(r row) {
	if r.target == "" || r.target == "report only" {
		r.target = "—"
	}
	if r.ratio == "" {
		r.ratio = "—"
	}
	r.verdict = "report only"
	b.rows = append(b.rows, r)
}

// notRun adds r for a measurement that could not be made, saying why.
func (b *bench) notRun(r row, why string) {
	r.ratio, r.verdict = "—", "not measured: "+why
	if r.pinfs == "" {
		r.pinfs = "—"
	}
	b.rows = append(b.rows, r)
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func gbs(v float64) string { return fmt.Sprintf("%.3f GB/s", v) }

func mb(v int64) string { return fmt.Sprintf("%.0f MB", float64(v)/1e6) }

// report prints the results and writes them to bench/results.md.
func (b *bench) report(t *testing.T) {
	var sb strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&sb, format, a...) }
	w("# pinfs bench results\n\n")
	w("- date: %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	w("- CPU: %s (%d cores; %s)\n", cpuModel(), runtime.NumCPU(), cpuFlags())
	w("- kernel: %s\n", readTrim("/proc/sys/kernel/osrelease"))
	w("- Go: %s\n", runtime.Version())
	w("- pinfs: %s\n", b.revision())
	w("- S3: versitygw %s (posix backend) on loopback, same machine\n", "v1.8.0")
	if b.shapeNote != "" {
		w("- shaped rows (\"shaped:\"): %s\n", b.shapeNote)
	}
	w("- baselines: raw aws-sdk-go-v2 in the test process; %s; %s; %s\n", toolVersion("s3fs", "--version"), toolVersion("b3sum", "--version"), toolVersion("fio", "--version"))
	w("- load average when the run started: %s; %s\n", b.loadStart, b.quiet)
	w("- bench run time: %s (make bench: `go test -run TestBench ./integration/bench/`)\n", time.Since(b.start).Round(time.Second))
	if t.Failed() {
		w("- **the run had failures: some rows are missing (see the test output)**\n")
	}
	w("\n| scenario | pinfs | raw aws-sdk-go-v2 | s3fs | b3sum | other baseline | ratio | target | verdict | pinfs CPU s/GB |\n")
	w("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range b.rows {
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.scenario, dash(r.pinfs), dash(r.raw), dash(r.s3fs), dash(r.b3sum),
			dash(r.other), dash(r.ratio), dash(r.target), r.verdict, dash(r.cpu))
	}
	w("\nGB = 10^9 bytes. Ratios are pinfs/baseline (for times: pinfs time/baseline time); the baseline a ratio is to is the one its target names. ")
	w("Targets are the constants of integration/bench/targets_test.go, fixed before measuring; a row without one is report only. ")
	w("CPU s/GB: CPU seconds (user+system, /proc/<pid>/stat) of the pinfs daemon per GB read.\n")

	var disturbed []string
	for _, m := range b.cpu {
		if c := m.other / m.window.Seconds(); c > 0.3 && m.window > 500*time.Millisecond {
			d := fmt.Sprintf("%s (%.1f cores", m.name, c)
			if m.others != "" {
				d += "; " + m.others
			}
			disturbed = append(disturbed, d+")")
		}
	}
	if len(disturbed) > 0 {
		w("\n**Disturbed**: CPU outside the measured processes (other processes on the machine, kernel threads) took more than 0.3 cores during ")
		w("(longest users named):\n\n")
		for _, d := range disturbed {
			w("- %s\n", d)
		}
		w("\nOn a 2-core machine such figures understate what pinfs, the raw client or versitygw can do.\n")
	}
	w("\n## CPU use per measurement\n\n")
	w("The machine has %d cores: `cores` = CPU seconds / wall seconds; `busy` = share of all cores busy (/proc/stat).\n\n", runtime.NumCPU())
	w("`other` is the rest of the machine's busy CPU time in that window (kernel threads such as writeback, softirq, and any other process ")
	w("on the machine: a large value means the measurement was disturbed; /proc/stat counts in 10 ms ticks, so it is noise for windows under 0.5 s).\n\n")
	w("| measurement | wall s | GB | GB/s | pinfs daemon CPU s (cores) | reader CPU s | versitygw CPU s (cores) | other CPU s | busy | daemon s/GB | reader s/GB | versitygw s/GB |\n")
	w("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range b.cpu {
		ws := m.wall.Seconds()
		gb, rate := "—", "—"
		if m.bytes > 0 {
			gb, rate = fmt.Sprintf("%.3f", float64(m.bytes)/1e9), fmt.Sprintf("%.3f", m.gbps())
		}
		w("| %s | %.2f | %s | %s | %.2f (%.2f) | %.2f | %.2f (%.2f) | %.2f | %.0f%% | %s | %s | %s |\n",
			m.name, ws, gb, rate, m.daemon, m.daemon/ws, m.reader, m.server, m.server/ws, m.other, 100*m.busy,
			perGB(m.daemon, m.bytes), perGB(m.reader, m.bytes), perGB(m.server, m.bytes))
	}

	w("\n## Daemon stats (run_end totals from each mount's run record)\n\n")
	for _, s := range b.stats {
		w("- %s\n", s)
	}
	w("\n## Where the time goes\n\n")
	if b.profile == "" {
		w("No profile taken.\n")
	} else {
		w("%s\n", b.profile)
	}
	w("\n## Method and notes\n\n")
	notes := append([]string{
		"Every pinfs mount is a background `pinfs mount` (returns once serving) with a fresh --cache-dir unless stated; it is unmounted with `pinfs unmount` and its run_end read from its run record.",
		"Cold = fresh cache dir + `sync; echo 3 > /proc/sys/vm/drop_caches`. The drop also evicts versitygw's backend files, so before every S3 measurement (raw and pinfs alike) the backend files of the objects read are read once into the page cache again: both sides see the same, warm, server.",
		"Raw baselines use aws-sdk-go-v2 in the test process (64 idle conns per host, checksums only when required, as pinfs's client); their `reader` CPU is the test process.",
		"pinfs and versitygw share the machine's cores; so do the raw client and versitygw.",
		fmt.Sprintf("s3fs (Debian) mounts the same bucket of the same versitygw in the same run: `s3fs data:/PREFIX MNT -o ro,url=ENDPOINT,use_path_request_style,passwd_file=F,parallel_count=%d,retries=2`, a fresh mount per measurement, "+
			"no use_cache (its default: nothing kept between mounts); it reads the current version of each key and verifies nothing. Its daemon's CPU is in the `pinfs daemon` column of its rows.", s3fsParallel),
		"b3sum: `b3sum --num-threads 2` of a local copy of the 1 GiB object in the page cache (best of 3): what BLAKE3 verification of the same bytes costs with nothing else in the way. The disk-cache row it judges reads the block files from the page cache too (they were just written); the report-only row below it drops the page cache before pinfs's read and before one more b3sum, so that both read the disk.",
		fmt.Sprintf("Shuffled row: one fixed permutation of the 2000 files; %d reader processes (the test binary re-run as a worker, os.ReadFile per file), process k reading files k, k+%d, … of it, as a data loader's workers do; the raw client GETs the same order %d at a time.", shuffledProcs, shuffledProcs, shuffledProcs),
		fmt.Sprintf("`pinfs warm` runs with --quiet into a fresh cache dir after the same page cache drop and server warm-up; --jobs %d for the small files, the raw baseline's parallelism. Its CPU is the warm process's.", warmJobs),
	}, b.notes...)
	for _, n := range notes {
		w("- %s\n", n)
	}
	out := sb.String()
	fmt.Println()
	fmt.Print(out)
	if f := flag.Lookup("test.run"); f != nil && strings.Contains(f.Value.String(), "/") || benchOnly() != "" {
		fmt.Println("\n(a partial run (-run or PINFS_BENCH_ONLY selects scenarios): bench/results.md left as it was)")
		return
	}
	p := filepath.Join(b.root, "bench", "results.md")
	if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
		t.Errorf("writing %s: %v", p, err)
	} else {
		fmt.Printf("\n(written to %s)\n", p)
	}
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// cpuFlags says whether the CPU has the AVX2 and AVX-512 instructions
// BLAKE3 uses.
func cpuFlags() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	var flags []string
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			flags = strings.Fields(v)
			break
		}
	}
	has := func(f string) string {
		if slices.Contains(flags, f) {
			return f + " yes"
		}
		return f + " no"
	}
	return has("avx2") + ", " + has("avx512f") + ", " + has("avx512vl")
}

// toolVersion is the first line of `name args`, or why there is none.
func toolVersion(name string, args ...string) string {
	if _, err := exec.LookPath(name); err != nil {
		return name + " not installed"
	}
	r := run(10*time.Second, nil, name, args...)
	return strings.TrimSpace(firstLine(r.stdout + r.stderr))
}

func readTrim(p string) string {
	b, _ := os.ReadFile(p)
	return strings.TrimSpace(string(b))
}

// revision names the commit the binary was built from and the paths with
// uncommitted changes (other work in progress is measured too).
func (b *bench) revision() string {
	r := run(10*time.Second, nil, "git", "-C", b.root, "rev-parse", "--short", "HEAD")
	rev := strings.TrimSpace(r.stdout)
	if r.err != nil || rev == "" {
		return "unknown commit"
	}
	st := run(10*time.Second, nil, "git", "-C", b.root, "status", "--porcelain", "--", ".", ":!bench/results.md", ":!integration/bench")
	dirs := map[string]bool{}
	for _, line := range strings.Split(st.stdout, "\n") {
		if len(line) < 4 {
			continue
		}
		p := strings.TrimSpace(line[3:])
		if d := filepath.Dir(p); d != "." {
			p = d
		}
		dirs[p] = true
	}
	if len(dirs) == 0 {
		return "commit " + rev
	}
	var ds []string
	for d := range dirs {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	return fmt.Sprintf("commit %s plus uncommitted changes in %s", rev, strings.Join(ds, ", "))
}
