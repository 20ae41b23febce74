package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// profileCold repeats the cold sequential read of the 1 GiB object while
// profiling it: a CPU profile of the daemon from its pprof endpoint
// (--metrics-addr) and a system-wide `perf record`, and keeps summaries:
// the CPU by process, the daemon's kernel/user split and hottest symbols,
// and the hottest Go functions.
func (b *bench) profileCold(t *testing.T) {
	_, perfErr := exec.LookPath("perf")
	hasPerf := perfErr == nil
	if !hasPerf && !b.hasMetrics {
		b.profile = "Skipped: perf is not installed (apt-get install linux-perf) and this pinfs has no --metrics-addr (pprof)."
		t.Skip(b.profile)
	}
	m := b.mount(t, "1 GiB cold, profiled", b.env, b.bigDigest, storeURL, t.TempDir())
	dropCaches(t)
	b.warmServer(t, b.bigObj())
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var perf *exec.Cmd
	perfData := filepath.Join(dir, "perf.data")
	if hasPerf {
		perf = exec.CommandContext(ctx, "perf", "record", "-a", "-F", "999", "-o", perfData)
		if err := perf.Start(); err != nil {
			t.Logf("perf record: %v", err)
			perf = nil
		} else {
			time.Sleep(300 * time.Millisecond)
		}
	}
	secs := max(2, int(math.Ceil(b.coldWall.Seconds()))+1)
	type prof struct {
		b   []byte
		err error
	}
	pprofc := make(chan prof, 1)
	if b.hasMetrics {
		go func() {
			c := &http.Client{Timeout: time.Duration(secs+30) * time.Second}
			resp, err := c.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", m.metrics, secs))
			if err != nil {
				pprofc <- prof{err: err}
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%s: %s", resp.Status, body)
			}
			pprofc <- prof{body, err}
		}()
		time.Sleep(100 * time.Millisecond)
	}
	r := run(5*time.Minute, nil, "dd", "if="+filepath.Join(m.dir, bigMember), "of=/dev/null", "bs=1M")
	if perf != nil {
		perf.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- perf.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			perf.Process.Kill()
			<-done
		}
	}
	var pp prof
	if b.hasMetrics {
		select {
		case pp = <-pprofc:
		case <-time.After(time.Duration(secs+40) * time.Second):
			pp.err = fmt.Errorf("no profile after %ds", secs+40)
		}
	}
	if r.err != nil {
		t.Fatalf("dd: %v %s", r.err, r.stderr)
	}
	rate := float64(ddBytes(r.stderr)) / 1e9 / r.wall.Seconds()
	b.finish(t, m)

	var sb strings.Builder
	fmt.Fprintf(&sb, "A second cold sequential read of the 1 GiB member (fresh cache dir, page cache dropped), profiled, ran at %.3f GB/s "+
		"(the profilers cost a little).\n", rate)
	if b.hasMetrics {
		if pp.err != nil {
			fmt.Fprintf(&sb, "\npprof CPU profile of the daemon: failed: %v\n", pp.err)
		} else {
			f := filepath.Join(dir, "cpu.pprof")
			os.WriteFile(f, pp.b, 0o644)
			pprof := func(args ...string) string {
				r := run(2*time.Minute, nil, "go", append(append([]string{"tool", "pprof"}, args...), b.bin, f)...)
				if r.err != nil {
					return fmt.Sprintf("go tool pprof: %v\n%s", r.err, r.stderr)
				}
				return r.stdout
			}
			fmt.Fprintf(&sb, "\npprof CPU profile of the daemon (%d s from /debug/pprof/profile, covering the read), "+
				"`go tool pprof -top` (flat), then `-top -cum` (who spends it):\n\n```\n%s```\n\n```\n%s```\n",
				secs, pprof("-top", "-nodecount=20"), pprof("-top", "-cum", "-nodecount=35"))
		}
	}
	if perf != nil {
		report := func(args ...string) string {
			rr := run(2*time.Minute, nil, "perf", append([]string{"report", "-i", perfData, "--stdio"}, args...)...)
			if rr.err != nil {
				return fmt.Sprintf("(perf report %v: %v)", args, rr.err)
			}
			var keep []string
			for _, l := range strings.Split(rr.stdout, "\n") {
				if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
					continue
				}
				keep = append(keep, l)
			}
			return strings.Join(keep[:min(len(keep), 25)], "\n")
		}
		fmt.Fprintf(&sb, "\n`perf record -a -F 999` (cpu-clock) over the read. CPU samples by process (all cores; idle = swapper):\n\n```\n%s\n```\n\n"+
			"The pinfs daemon's samples: %s\n\n"+
			"Hottest symbols of the pinfs daemon, kernel included (share of its own samples):\n\n```\n%s\n```\n\n"+
			"Hottest symbols of versitygw (share of its own samples):\n\n```\n%s\n```\n",
			report("--sort", "comm", "--percent-limit", "0.5"),
			kernelShare(perfData),
			report("--comm", "pinfs", "--sort", "sym", "--percentage", "relative", "--percent-limit", "1"),
			report("--comm", "versitygw", "--sort", "sym", "--percentage", "relative", "--percent-limit", "2"))
	} else {
		fmt.Fprintf(&sb, "\nperf not installed: no system-wide view.\n")
	}
	b.profile = sb.String()
}

// kernelShare sums the pinfs daemon's perf samples in the kernel ([k]:
// FUSE, copies, page cache, network, disk writes) and in user space.
func kernelShare(data string) string {
	r := run(2*time.Minute, nil, "perf", "report", "-i", data, "--stdio", "--comm", "pinfs", "--sort", "sym", "--percentage", "relative")
	if r.err != nil {
		return fmt.Sprintf("(perf report: %v)", r.err)
	}
	var k, u float64
	for _, l := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || !strings.HasSuffix(f[0], "%") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(f[0], "%"), 64)
		if err != nil {
			continue
		}
		switch f[1] {
		case "[k]":
			k += v
		case "[.]":
			u += v
		}
	}
	return fmt.Sprintf("%.0f%% in the kernel (FUSE, copies, page cache, sockets, disk-cache writes), %.0f%% in user space.", k, u)
}
