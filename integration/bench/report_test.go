package bench

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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
	busy, total          float64 // machine CPU seconds (all cores)
	procs                map[int]procTime
}

func (b *bench) sample(daemonPid int) sample {
	s := sample{t: time.Now(), self: selfCPU()}
	s.daemon, _ = procCPU(daemonPid)
	s.server, _ = procCPU(b.serverPid())
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
	m.other = max(0, (s1.busy-s0.busy)-m.daemon-m.reader-m.server-self)
	type use struct {
		name string
		cpu  float64
	}
	var uses []use
	me, server := os.Getpid(), b.serverPid()
	for pid, p1 := range s1.procs {
		if pid == me || pid == daemonPid || pid == server {
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

// row is one line of the results table.
type row struct {
	scenario, pinfs, base, ratio, target, holds, cpu string
}

// check adds a row with a target: ratio = pinfs/base must be >= (atLeast)
// or <= the target.
func (b *bench) check(scenario, pinfs, base string, ratio float64, atLeast bool, target float64, cpu string) {
	op, ok := "≤", ratio <= target
	if atLeast {
		op, ok = "≥", ratio >= target
	}
	holds := "no"
	if ok {
		holds = "yes"
	}
	b.rows = append(b.rows, row{scenario, pinfs, base, fmt.Sprintf("%.2f", ratio), fmt.Sprintf("%s %.2f", op, target), holds, cpu})
}

// limit adds a row with an absolute limit (base is the limit itself).
func (b *bench) limit(scenario string, v, lim float64, unit, cpu string) {
	holds := "no"
	if v <= lim {
		holds = "yes"
	}
	b.rows = append(b.rows, row{scenario, fmt.Sprintf("%.2f %s", v, unit), "—", fmt.Sprintf("%.2f", v/lim),
		fmt.Sprintf("≤ %g %s", lim, unit), holds, cpu})
}

// info adds a row without a target.
func (b *bench) info(scenario, pinfs, base, ratio, target, cpu string) {
	b.rows = append(b.rows, row{scenario, pinfs, base, ratio, target, "—", cpu})
}

func gbs(v float64) string { return fmt.Sprintf("%.3f GB/s", v) }

func mb(v int64) string { return fmt.Sprintf("%.0f MB", float64(v)/1e6) }

// report prints the results and writes them to bench/results.md.
func (b *bench) report(t *testing.T) {
	var sb strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&sb, format, a...) }
	w("# pinfs bench results\n\n")
	w("- date: %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	w("- CPU: %s (%d cores)\n", cpuModel(), runtime.NumCPU())
	w("- kernel: %s\n", readTrim("/proc/sys/kernel/osrelease"))
	w("- Go: %s\n", runtime.Version())
	w("- pinfs: %s\n", b.revision())
	w("- S3: versitygw %s (posix backend) on loopback, same machine\n", "v1.8.0")
	w("- load average when the run started: %s; %s\n", b.loadStart, b.quiet)
	w("- bench run time: %s (make bench: `go test -run TestBench ./integration/bench/`)\n", time.Since(b.start).Round(time.Second))
	if t.Failed() {
		w("- **the run had failures: some rows are missing (see the test output)**\n")
	}
	w("\n| scenario | pinfs | baseline | ratio | target | holds | pinfs CPU s/GB |\n")
	w("|---|---|---|---|---|---|---|\n")
	for _, r := range b.rows {
		w("| %s | %s | %s | %s | %s | %s | %s |\n", r.scenario, r.pinfs, r.base, r.ratio, r.target, r.holds, r.cpu)
	}
	w("\nGB = 10^9 bytes. Ratios are pinfs/baseline (for times: pinfs time/baseline time). ")
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
	}, b.notes...)
	for _, n := range notes {
		w("- %s\n", n)
	}
	out := sb.String()
	fmt.Println()
	fmt.Print(out)
	if f := flag.Lookup("test.run"); f != nil && strings.Contains(f.Value.String(), "/") {
		fmt.Println("\n(a partial run (-run selects scenarios): bench/results.md left as it was)")
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
