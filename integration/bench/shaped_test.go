package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pinfs/pinfs/integration/faultproxy"
)

// Environment of the shaped rows and of the shaping proxy process.
const (
	latencyEnv     = "PINFS_BENCH_LATENCY"      // first-byte latency, e.g. 20ms
	rateEnv        = "PINFS_BENCH_RATE"         // per-response bandwidth, e.g. 100MB/s
	proxyTargetEnv = "PINFS_BENCH_PROXY_TARGET" // TestShapeProxyProcess: the server's endpoint
)

// s3fsShaped is the s3fs of the shaped rows (the baseline).
const s3fsShapedParallel, s3fsShapedMultipart = 16, 8

// shapedRun is the state the shaped rows share: every client reaches
// versitygw through one shaping proxy.
type shapedRun struct {
	*bench
	shape  faultproxy.Shape
	url    string     // the proxy's endpoint
	env    []string   // a pinfs process's environment, through the proxy
	client *s3.Client // the raw client, through the proxy
	s3fs   s3fsConf   // s3fs through the proxy

	rawBig      measure // best raw parallel GET of the 1 GiB object
	rawBigCell  string
	raw16       measure // raw GETs of the 2000 small objects, 16 at a time
	multi       []smallObj
	multiDigest string
}

// shapeFromEnv reads the link of the shaped rows from $PINFS_BENCH_LATENCY
// (a Go duration) and $PINFS_BENCH_RATE (bytes per second, or with a unit:
// 100MB/s, 1GB/s, 64MiB/s); the defaults are faultproxy.DefaultShape.
func shapeFromEnv() (faultproxy.Shape, error) {
	s := faultproxy.DefaultShape()
	if v := os.Getenv(latencyEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return s, fmt.Errorf("%s=%q: not a duration like 20ms", latencyEnv, v)
		}
		s.Latency = d
	}
	if v := os.Getenv(rateEnv); v != "" {
		r, err := parseRate(v)
		if err != nil {
			return s, fmt.Errorf("%s=%q: %v", rateEnv, v, err)
		}
		s.Rate = r
	}
	return s, nil
}

// rateUnits are the units parseRate knows, longest first.
var rateUnits = []struct {
	suffix string
	mult   float64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}, {"KB", 1e3}, {"B", 1}}

// parseRate parses a bandwidth: a number of bytes per second, optionally
// with a unit and "/s" (100MB/s = 1e8; 0 means unpaced).
func parseRate(s string) (float64, error) {
	t := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	mult := 1.0
	for _, u := range rateUnits {
		if v, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = v, u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || v < 0 {
		return 0, errors.New("not a rate like 100MB/s")
	}
	return v * mult, nil
}

// rateText prints a rate as the header and the rows show it.
func rateText(r float64) string {
	if r == 0 {
		return "unpaced"
	}
	return fmt.Sprintf("%g MB/s", r/1e6)
}

// TestShapeProxyProcess is not a test: it is the shaping proxy of the
// shaped rows, started by startProxy in a process of its own (so that its
// CPU is neither the raw client's nor the daemon's). It forwards to
// $PINFS_BENCH_PROXY_TARGET with the shape of shapeFromEnv, prints
// "proxy URL" and serves until its stdin closes. For each line "count" on
// stdin it prints "count N": the member GETs it has forwarded (GETs that
// name a versionId).
func TestShapeProxyProcess(t *testing.T) {
	target := os.Getenv(proxyTargetEnv)
	if target == "" {
		t.Skip("a helper process of make bench")
	}
	s, err := shapeFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.New(target, faultproxy.Options{Shape: s})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fmt.Printf("proxy %s\n", p.URL())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() != "count" {
			continue
		}
		n := 0
		for _, r := range p.Requests() {
			if r.Method == "GET" && r.VersionID() != "" {
				n++
			}
		}
		fmt.Printf("count %d\n", n)
	}
}

// proxyProc is a running TestShapeProxyProcess.
type proxyProc struct {
	url   string
	pid   int
	stdin io.WriteCloser
	lines chan string // its stdout after the first line
}

// memberGETs returns how many member GETs the proxy has forwarded.
func (p *proxyProc) memberGETs(t *testing.T) int {
	t.Helper()
	if _, err := io.WriteString(p.stdin, "count\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case line := <-p.lines:
		n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "count "))
		if err != nil {
			t.Fatalf("shaping proxy answered %q to count", line)
		}
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("shaping proxy did not answer count within 30 s")
	}
	return 0
}

// startProxy starts TestShapeProxyProcess in front of the bench's server
// and returns its endpoint and pid; t.Cleanup stops it.
func (b *bench) startProxy(t *testing.T, s faultproxy.Shape) (string, int) {
	p := b.startProxyProc(t, s)
	return p.url, p.pid
}

// startProxyProc starts TestShapeProxyProcess in front of the bench's
// server; t.Cleanup stops it.
func (b *bench) startProxyProc(t *testing.T, s faultproxy.Shape) *proxyProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestShapeProxyProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), proxyTargetEnv+"="+b.s.Endpoint,
		latencyEnv+"="+s.Latency.String(), rateEnv+"="+strconv.FormatFloat(s.Rate, 'f', -1, 64))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		cmd.Wait()
		close(exited)
	}()
	select {
	case line := <-lines:
		url, ok := strings.CutPrefix(strings.TrimSpace(line), "proxy ")
		if !ok {
			t.Fatalf("shaping proxy printed %q: %s", line, stderr.String())
		}
		return &proxyProc{url: url, pid: cmd.Process.Pid, stdin: stdin, lines: lines}
	case <-time.After(30 * time.Second):
		t.Fatalf("shaping proxy did not start within 30 s: %s", stderr.String())
	}
	return nil
}

// shaped is the issue 23 scenario: the rows of the table over a
// network-like link, every client (pinfs mounts and pinfs warm, the raw
// client, s3fs) through one shaping proxy in front of versitygw.
func (b *bench) shaped(t *testing.T) {
	s, err := shapeFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	url, pid := b.startProxy(t, s)
	b.proxyPid = pid
	t.Cleanup(func() { b.proxyPid = 0 })
	b.shapeNote = fmt.Sprintf("every client through one shaping proxy (integration/faultproxy shape mode, a process of its own): "+
		"%v before each response, each response body paced at %s on its own (%s=%s, %s=%s; defaults 20ms, 100MB/s)",
		s.Latency, rateText(s.Rate), latencyEnv, envOrUnset(latencyEnv), rateEnv, envOrUnset(rateEnv))
	sh := &shapedRun{bench: b, shape: s, url: url,
		env:    append(slices.Clone(b.env), "AWS_ENDPOINT_URL_S3="+url, "AWS_ENDPOINT_URL="+url),
		client: b.s.RawClientAt(url),
		s3fs:   s3fsConf{url: url, parallel: s3fsShapedParallel, multipart: s3fsShapedMultipart}}
	sh.setupMulti(t)
	cpu0, _ := procCPU(pid)
	first := len(b.cpu)
	t.Run("first-4KiB", sh.firstBytes)
	t.Run("16-readers", sh.multiReaders)
	t.Run("64-readers", sh.readers64)     // issue 38
	t.Run("shard-loader", sh.shardLoader) // issue 38
	t.Run("1GiB-sequential", sh.bigRows)
	t.Run("small-files", sh.smallRows)
	t.Run("shuffled", sh.shuffledRow)
	t.Run("warm", sh.warmRows)
	cpu1, _ := procCPU(pid)
	var read int64 // what the clients read through the proxy, about what it forwarded
	for _, m := range b.cpu[first:] {
		read += max(m.bytes, 0)
	}
	b.note("shaped: the section took %s, setup of its 16 × 256 MiB included; the shaping proxy used %.1f CPU s in its rows, "+
		"%s s per GB the clients read through it (%.1f GB)", time.Since(start).Round(time.Second), cpu1-cpu0, perGB(cpu1-cpu0, read), float64(read)/1e9)
	b.note("shaped: s3fs as in the loopback rows but through the proxy with parallel_count=%d,multipart_size=%d. "+
		"pinfs mounts with the bench's usual flags only (fresh --cache-dir; --cache-mem 256MiB where named), through the proxy for the store too; "+
		"the raw client is the loopback rows' client (64 idle conns per host) pointed at the proxy. "+
		"Cold rows drop the page cache and warm the server's files as the loopback rows do; the first-4KiB and 16-reader rows use a new mount "+
		"that has read none of the members (no drop needed) after warming the server's files. The proxy adds its latency after versitygw's "+
		"response headers arrive and paces each body in 64 KiB chunks, each sent no sooner than start + bytes/rate.",
		s3fsShapedParallel, s3fsShapedMultipart)
}

// latencies returns d as a multiple of the added latency (NaN without one).
func (sh *shapedRun) latencies(d time.Duration) float64 {
	return d.Seconds() / sh.shape.Latency.Seconds()
}

func msText(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }

// envOrUnset is $name, or "unset".
func envOrUnset(name string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return "unset"
}
