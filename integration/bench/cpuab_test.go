package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/s3test"
)

// TestCPUAB compares the daemon CPU per cold GB of pinfs binaries: the
// 1 GiB cold sequential read (dd bs=1M, fresh cache dir, page cache
// dropped, server warmed) with each binary of $PINFS_CPU_AB (a comma
// separated list of paths), interleaved, $PINFS_CPU_AB_ROUNDS times
// (default 3), next to the raw client (parallel ranged GETs of 8 MiB, 16
// streams) in the same round. With $PINFS_CPU_AB_PPROF set to a
// directory, the first round keeps a CPU profile of each daemon there;
// with $PINFS_CPU_AB_PERF, a `perf record -g` of each daemon (of the
// event $PINFS_CPU_AB_PERF_EVENT if set, such as context-switches; or, with
// $PINFS_CPU_AB_PERF_STAT set too, a `perf stat` of its context
// switches and page faults).
// With $PINFS_CPU_AB_DISK set, a new mount then reads the disk tier the
// cold read left (the store still up; every block a disk hit). It is a
// tool for A/B runs, not part of make bench.
func TestCPUAB(t *testing.T) {
	bins := os.Getenv("PINFS_CPU_AB")
	if bins == "" {
		t.Skip("A/B tool: set PINFS_CPU_AB=binA,binB")
	}
	rounds := 3
	if v := os.Getenv("PINFS_CPU_AB_ROUNDS"); v != "" {
		fmt.Sscan(v, &rounds)
	}
	pprofDir := os.Getenv("PINFS_CPU_AB_PPROF")
	perfDir := os.Getenv("PINFS_CPU_AB_PERF")
	b := &bench{start: time.Now(), hasMetrics: true}
	b.s = s3test.Start(t)
	b.env = b.s.Env()
	b.client = b.s.RawClient()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.putBig(t, ctx)
	runtime.GC()
	list := strings.Split(bins, ",")
	b.bin, benchBin = list[0], list[0]
	b.bigDigest = b.pin(t, "s3://data/big/", storeURL, b.env, "1 GiB object")

	type tally struct{ cpu, gbps []float64 }
	res := make(map[string]*tally)
	add := func(name string, cpu, gbps float64) {
		if res[name] == nil {
			res[name] = &tally{}
		}
		res[name].cpu = append(res[name].cpu, cpu)
		res[name].gbps = append(res[name].gbps, gbps)
	}
	for round := range rounds {
		dropCaches(t)
		b.warmServer(t, b.bigObj())
		s0 := b.sample(0)
		if _, err := rawParallelGET(ctx, b.client, "data", bigKey, b.bigVersion, bigSize, 8<<20, 16); err != nil {
			t.Fatal(err)
		}
		raw := b.done("raw", s0, 0, bigSize, -1)
		add("raw", raw.reader/(float64(raw.bytes)/1e9), raw.gbps())
		for i, bin := range list {
			b.bin, benchBin = bin, bin
			cache := t.TempDir()
			m := b.mount(t, fmt.Sprintf("ab %d", i), b.env, b.bigDigest, storeURL, cache,
				"--cache-mem", "256MiB", "--cache-disk", "10GiB")
			dropCaches(t)
			b.warmServer(t, b.bigObj())
			var prof chan []byte
			if pprofDir != "" && round == 0 {
				prof = make(chan []byte, 1)
				go func() {
					resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=3", m.metrics))
					if err != nil {
						prof <- nil
						return
					}
					defer resp.Body.Close()
					body, _ := io.ReadAll(resp.Body)
					prof <- body
				}()
				time.Sleep(50 * time.Millisecond)
			}
			var perf *exec.Cmd
			if perfDir != "" && round == 0 {
				args := []string{"record", "-g", "-F", "999", "-p", fmt.Sprint(m.pid),
					"-o", filepath.Join(perfDir, fmt.Sprintf("perf-%d.data", i))}
				if ev := os.Getenv("PINFS_CPU_AB_PERF_EVENT"); ev != "" {
					args = append(args, "-e", ev)
				}
				perf = exec.Command("perf", args...)
				if os.Getenv("PINFS_CPU_AB_PERF_STAT") != "" {
					perf = exec.Command("perf", "stat", "-e", "context-switches,page-faults,cpu-migrations", "-p", fmt.Sprint(m.pid),
						"-o", filepath.Join(perfDir, fmt.Sprintf("stat-%d.txt", i)))
				}
				if err := perf.Start(); err != nil {
					t.Logf("perf: %v", err)
					perf = nil
				} else {
					time.Sleep(300 * time.Millisecond)
				}
			}
			cold := b.dd(t, fmt.Sprintf("bin %d round %d", i, round), filepath.Join(m.dir, bigMember), m.pid, bigSize)
			if perf != nil {
				perf.Process.Signal(syscall.SIGINT)
				perf.Wait()
			}
			if prof != nil {
				os.WriteFile(filepath.Join(pprofDir, fmt.Sprintf("cpu-%d.pprof", i)), <-prof, 0o644)
			}
			t.Logf("bin %d round %d: daemon peak RSS %d MB", i, round, procStatus(m.pid, "VmHWM")>>20)
			m.unmount(t)
			add(bin, cold.daemon/(float64(cold.bytes)/1e9), cold.gbps())
			if os.Getenv("PINFS_CPU_AB_DISK") != "" {
				// The disk tier the cold read left, read by a new mount
				// (page cache as the cold read left it).
				m := b.mount(t, fmt.Sprintf("ab %d disk", i), b.env, b.bigDigest, storeURL, cache,
					"--cache-mem", "64MiB", "--cache-disk", "10GiB")
				d := b.dd(t, fmt.Sprintf("bin %d round %d, disk tier", i, round), filepath.Join(m.dir, bigMember), m.pid, bigSize)
				m.unmount(t)
				add(bin+" (disk tier)", d.daemon/(float64(d.bytes)/1e9), d.gbps())
			}
		}
	}
	for _, name := range append([]string{"raw"}, list...) {
		for _, name := range []string{name, name + " (disk tier)"} {
			r := res[name]
			if r == nil {
				continue
			}
			t.Logf("AB %-40s s/GB %v  GB/s %v", name, fmtF(r.cpu), fmtF(r.gbps))
		}
	}
}

func fmtF(v []float64) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprintf("%.2f", x))
	}
	return strings.Join(s, " ")
}
