package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/fusetest"
)

const (
	mountTimeout   = 3 * time.Minute  // `pinfs mount` until it serves
	unmountTimeout = 15 * time.Second // `pinfs unmount`
	exitTimeout    = 20 * time.Second // daemon exit after the unmount
)

// mount is one background `pinfs mount` daemon.
type mount struct {
	name    string // scenario, for the stats section
	dir     string // mountpoint
	cache   string
	record  string // run record (JSON Lines)
	pid     int
	ready   time.Duration // wall time of `pinfs mount`
	metrics string        // --metrics-addr (host:port), "" when the binary has none
	scraped string        // the last scrape of /metrics (pinfs_ series, no buckets)
	done    bool
}

var pidRE = regexp.MustCompile(`\(pid (\d+)`)

// mount runs `pinfs mount` in background mode (it returns once the mount
// serves) and registers a bounded unmount in t.Cleanup.
func (b *bench) mount(t *testing.T, name string, env []string, digest, store, cache string, flags ...string) *mount {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := &mount{name: name, dir: dir, cache: cache, record: filepath.Join(t.TempDir(), "run.jsonl")}
	t.Cleanup(func() { m.unmount(t) })
	args := append([]string{"mount", digest, dir, "--store", store, "--cache-dir", cache, "--run-record", m.record}, flags...)
	if b.hasMetrics {
		m.metrics = freeAddr(t)
		args = append(args, "--metrics-addr", m.metrics)
	}
	r := run(mountTimeout, env, b.bin, args...)
	m.ready = r.wall
	if r.err != nil {
		t.Fatalf("pinfs %s: %v\n%s%s\n%s", strings.Join(args, " "), r.err, r.stdout, r.stderr, m.daemonLog())
	}
	sm := pidRE.FindStringSubmatch(r.stdout)
	if sm == nil {
		t.Fatalf("pinfs mount printed no pid: %q", r.stdout)
	}
	m.pid, _ = strconv.Atoi(sm[1])
	if !fusetest.Mounted(dir) {
		t.Fatalf("pinfs mount returned but %s is not a FUSE mount", dir)
	}
	return m
}

// unmount runs `pinfs unmount` and waits (bounded) for the daemon to
// exit, having written run_end. Whatever is left is killed and the
// mount aborted and detached. It runs once.
func (m *mount) unmount(t testing.TB) {
	if m.done {
		return
	}
	m.done = true
	if m.pid > 0 {
		if r := run(unmountTimeout, nil, benchBin, "unmount", m.dir); r.err != nil {
			t.Logf("pinfs unmount %s: %v %s; trying --lazy", m.dir, r.err, r.stderr)
			run(unmountTimeout, nil, benchBin, "unmount", "--lazy", m.dir)
		}
		deadline := time.Now().Add(exitTimeout)
		for alive(m.pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(m.pid) {
			t.Errorf("pinfs daemon %d (%s) still running %v after unmount; killing it", m.pid, m.dir, exitTimeout)
			syscall.Kill(m.pid, syscall.SIGKILL)
		}
	}
	fusetest.ForceUnmount(t, m.dir)
}

// daemonLog returns the tail of the background daemon's logs.
func (m *mount) daemonLog() string {
	files, _ := filepath.Glob(filepath.Join(m.cache, "logs", "*.log"))
	var sb strings.Builder
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if len(b) > 4096 {
			b = b[len(b)-4096:]
		}
		fmt.Fprintf(&sb, "--- %s\n%s", f, b)
	}
	return sb.String()
}

// runEnd returns the totals of the last run_end event in the run record.
func (m *mount) runEnd() (map[string]int64, error) {
	f, err := os.Open(m.record)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var totals map[string]int64
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 64<<20) // consumed sets can be long lines
	for s.Scan() {
		var ev struct {
			Event  string           `json:"event"`
			Totals map[string]int64 `json:"totals"`
		}
		if json.Unmarshal(s.Bytes(), &ev) == nil && ev.Event == "run_end" {
			totals = ev.Totals
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if totals == nil {
		return nil, fmt.Errorf("no run_end in %s", m.record)
	}
	return totals, nil
}

// freeAddr returns 127.0.0.1:PORT for a port that was free a moment ago.
func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// scrape reads the daemon's /metrics and keeps the pinfs_ series that are
// not zero, without histogram buckets and without the digest and run_id
// labels (one mount, one run), as "name[tier]=value", plus the mean read
// latency.
func (m *mount) scrape() string {
	if m.metrics == "" {
		return ""
	}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + m.metrics + "/metrics")
	if err != nil {
		return fmt.Sprintf("(metrics: %v)", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out []string
	vals := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "pinfs_") || strings.Contains(line, "_bucket{") {
			continue
		}
		k, v, ok := strings.Cut(line, " ")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil || f == 0 {
			continue
		}
		name, labels, _ := strings.Cut(k, "{")
		name = strings.TrimPrefix(name, "pinfs_")
		for _, l := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
			if lk, lv, ok := strings.Cut(l, "="); ok && lk != "digest" && lk != "run_id" {
				name += "[" + strings.Trim(lv, `"`) + "]"
			}
		}
		vals[name] = f
		out = append(out, fmt.Sprintf("%s=%.10g", name, f))
	}
	if n := vals["read_duration_seconds_count"]; n > 0 {
		out = append(out, fmt.Sprintf("mean_read_latency=%.2fms", 1000*vals["read_duration_seconds_sum"]/n))
	}
	m.scraped = strings.Join(out, " ")
	return m.scraped
}

// finish unmounts and records the daemon's run_end totals (and its last
// metrics) for the report.
func (b *bench) finish(t testing.TB, m *mount) map[string]int64 {
	if s := m.scrape(); s != "" {
		b.stats = append(b.stats, fmt.Sprintf("%s: metrics before unmount: %s", m.name, s))
	}
	m.unmount(t)
	tot, err := m.runEnd()
	if err != nil {
		t.Errorf("%s: %v", m.name, err)
		b.stats = append(b.stats, fmt.Sprintf("%s: run_end not found (%v)", m.name, err))
		return nil
	}
	keys := []string{"members_opened", "bytes_served", "blocks_verified", "mem_hits", "disk_hits",
		"network_fetches", "mismatches", "version_missing", "fetch_failed"}
	var parts []string
	for _, k := range keys {
		if v, ok := tot[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%d", k, v))
		}
	}
	for k, v := range tot { // fields added later
		if !strings.Contains(strings.Join(keys, " "), k) {
			parts = append(parts, fmt.Sprintf("%s=%d", k, v))
		}
	}
	line := fmt.Sprintf("%s: %s", m.name, strings.Join(parts, " "))
	b.stats = append(b.stats, line)
	t.Log("run_end " + line)
	return tot
}
