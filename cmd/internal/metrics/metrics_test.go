package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/fs"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/verify/b3"
)

// fakeSource returns the Stats it is given, and counts the calls.
type fakeSource struct {
	mu    sync.Mutex
	st    blocks.Stats
	calls int
}

func (f *fakeSource) Stats() blocks.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.st
}

func (f *fakeSource) set(st blocks.Stats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st = st
}

var sampleStats = blocks.Stats{
	BytesServed:    123456,
	BlocksVerified: 17,
	MemHits:        40,
	DiskHits:       9,
	Joined:         3,
	NetworkFetches: 8,
	Requests:       11,
	Retries:        2,
	Mismatches:     1,
	OutboardLoads:  4,
	Readaheads:     6,
	// Readahead skipped for lack of budget, the budget, what it holds now
	// and the largest window reached.
	ReadaheadSkipped:   18,
	ReadaheadBudget:    64 << 20,
	ReadaheadBytes:     24 << 20,
	ReadaheadWindowMax: 128 << 20,
	ReadaheadResets:    19,
	VersionMissing:     14,
	FetchFailed:        15,
	// An event the run record could not take: it failed its read.
	EventsUnrecorded: 16,
	Mem:              cache.MemStats{Hits: 41, Misses: 30, Bytes: 7 << 20, Evictions: 12, Rejected: 1},
	Disk:             cache.DiskStats{Hits: 10, Misses: 8, Bytes: 9 << 20, Blocks: 9, Evictions: 13, Writes: 8, WriteErrors: 5},
}

const wantStats = `
# HELP pinfs_blocks_verified_total Blocks, from disk or the network, that passed BLAKE3 verification.
# TYPE pinfs_blocks_verified_total counter
pinfs_blocks_verified_total{digest="b3:abc",run_id="r1"} 17
# HELP pinfs_bytes_served_total Bytes copied into readers' buffers.
# TYPE pinfs_bytes_served_total counter
pinfs_bytes_served_total{digest="b3:abc",run_id="r1"} 123456
# HELP pinfs_cache_evictions_total Blocks evicted from a cache tier to stay within its budget.
# TYPE pinfs_cache_evictions_total counter
pinfs_cache_evictions_total{digest="b3:abc",run_id="r1",tier="disk"} 13
pinfs_cache_evictions_total{digest="b3:abc",run_id="r1",tier="memory"} 12
# HELP pinfs_cache_hits_total Blocks served from a cache tier: memory, or disk (counted once verified).
# TYPE pinfs_cache_hits_total counter
pinfs_cache_hits_total{digest="b3:abc",run_id="r1",tier="disk"} 9
pinfs_cache_hits_total{digest="b3:abc",run_id="r1",tier="memory"} 40
# HELP pinfs_cache_misses_total Lookups in a cache tier that found no block. A block that is not in memory may be looked up there twice: once by the read, once by the load it starts.
# TYPE pinfs_cache_misses_total counter
pinfs_cache_misses_total{digest="b3:abc",run_id="r1",tier="disk"} 8
pinfs_cache_misses_total{digest="b3:abc",run_id="r1",tier="memory"} 30
# HELP pinfs_disk_cache_blocks Blocks held by the disk cache tier.
# TYPE pinfs_disk_cache_blocks gauge
pinfs_disk_cache_blocks{digest="b3:abc",run_id="r1"} 9
# HELP pinfs_disk_cache_bytes Bytes held by the disk cache tier.
# TYPE pinfs_disk_cache_bytes gauge
pinfs_disk_cache_bytes{digest="b3:abc",run_id="r1"} 9.437184e+06
# HELP pinfs_disk_cache_write_errors_total Verified blocks the disk cache tier failed to store.
# TYPE pinfs_disk_cache_write_errors_total counter
pinfs_disk_cache_write_errors_total{digest="b3:abc",run_id="r1"} 5
# HELP pinfs_events_unrecorded_total Read-path events the run record and its spool could not take; each failed the read that caused it (EIO).
# TYPE pinfs_events_unrecorded_total counter
pinfs_events_unrecorded_total{digest="b3:abc",run_id="r1"} 16
# HELP pinfs_fetch_failures_total Block loads that failed for a storage error, after retries or the read timeout (fetch_failed events).
# TYPE pinfs_fetch_failures_total counter
pinfs_fetch_failures_total{digest="b3:abc",run_id="r1"} 15
# HELP pinfs_joined_reads_total Block reads served by a load that another read or a readahead had started.
# TYPE pinfs_joined_reads_total counter
pinfs_joined_reads_total{digest="b3:abc",run_id="r1"} 3
# HELP pinfs_memory_cache_bytes Bytes held by the memory cache tier.
# TYPE pinfs_memory_cache_bytes gauge
pinfs_memory_cache_bytes{digest="b3:abc",run_id="r1"} 7.340032e+06
# HELP pinfs_network_fetches_total Blocks fetched from the store.
# TYPE pinfs_network_fetches_total counter
pinfs_network_fetches_total{digest="b3:abc",run_id="r1"} 8
# HELP pinfs_outboard_loads_total Bao outboards loaded through the metadata cache for verification.
# TYPE pinfs_outboard_loads_total counter
pinfs_outboard_loads_total{digest="b3:abc",run_id="r1"} 4
# HELP pinfs_readahead_budget_bytes Bytes readahead and warm loads may have requested and not yet read at once (--readahead-budget).
# TYPE pinfs_readahead_budget_bytes gauge
pinfs_readahead_budget_bytes{digest="b3:abc",run_id="r1"} 6.7108864e+07
# HELP pinfs_readahead_fetches_total Block loads started by readahead.
# TYPE pinfs_readahead_fetches_total counter
pinfs_readahead_fetches_total{digest="b3:abc",run_id="r1"} 6
# HELP pinfs_readahead_inflight_bytes Bytes readahead and warm loads have requested and not yet read: in flight, or loaded and waiting for their reader.
# TYPE pinfs_readahead_inflight_bytes gauge
pinfs_readahead_inflight_bytes{digest="b3:abc",run_id="r1"} 2.5165824e+07
# HELP pinfs_readahead_resets_total Open readahead windows closed by a reader that jumped (seeked, or read at random).
# TYPE pinfs_readahead_resets_total counter
pinfs_readahead_resets_total{digest="b3:abc",run_id="r1"} 19
# HELP pinfs_readahead_skipped_total Times readahead stopped short for lack of room in the readahead budget (its blocks are asked for again at the next read).
# TYPE pinfs_readahead_skipped_total counter
pinfs_readahead_skipped_total{digest="b3:abc",run_id="r1"} 18
# HELP pinfs_readahead_window_max_bytes The largest readahead window a sequential reader has reached (at most --readahead-max).
# TYPE pinfs_readahead_window_max_bytes gauge
pinfs_readahead_window_max_bytes{digest="b3:abc",run_id="r1"} 1.34217728e+08
# HELP pinfs_store_requests_total Ranged reads sent to the store: first tries, resumptions and retries.
# TYPE pinfs_store_requests_total counter
pinfs_store_requests_total{digest="b3:abc",run_id="r1"} 11
# HELP pinfs_store_retries_total Store requests and outboard loads repeated after a failure.
# TYPE pinfs_store_retries_total counter
pinfs_store_retries_total{digest="b3:abc",run_id="r1"} 2
# HELP pinfs_verification_failures_total Copies of blocks, from disk or the network, that failed BLAKE3 verification.
# TYPE pinfs_verification_failures_total counter
pinfs_verification_failures_total{digest="b3:abc",run_id="r1"} 1
# HELP pinfs_versions_missing_total Block loads that found the pinned object version gone (version_missing events).
# TYPE pinfs_versions_missing_total counter
pinfs_versions_missing_total{digest="b3:abc",run_id="r1"} 14
`

var statNames = []string{
	"pinfs_blocks_verified_total", "pinfs_bytes_served_total", "pinfs_cache_evictions_total",
	"pinfs_cache_hits_total", "pinfs_cache_misses_total", "pinfs_disk_cache_blocks",
	"pinfs_disk_cache_bytes", "pinfs_disk_cache_write_errors_total", "pinfs_events_unrecorded_total",
	"pinfs_fetch_failures_total", "pinfs_joined_reads_total",
	"pinfs_memory_cache_bytes", "pinfs_network_fetches_total", "pinfs_outboard_loads_total",
	"pinfs_readahead_fetches_total", "pinfs_store_requests_total", "pinfs_store_retries_total",
	"pinfs_verification_failures_total", "pinfs_versions_missing_total",
}

// serve starts m.Serve on a free loopback port and returns its base URL.
func serve(t *testing.T, m *Metrics) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr, err := m.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + addr.String()
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	return string(b)
}

func TestScrapeStats(t *testing.T) {
	src := &fakeSource{st: sampleStats}
	m := New(src, "digest", "b3:abc", "run_id", "r1")
	url := serve(t, m) + "/metrics"
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(wantStats), statNames...); err != nil {
		t.Fatal(err)
	}

	// Values are read at scrape time, not when New ran.
	next := sampleStats
	next.BytesServed += 1000
	next.Mem.Bytes = 0
	src.set(next)
	want := strings.NewReplacer(
		"} 123456\n", "} 124456\n",
		`pinfs_memory_cache_bytes{digest="b3:abc",run_id="r1"} 7.340032e+06`,
		`pinfs_memory_cache_bytes{digest="b3:abc",run_id="r1"} 0`,
	).Replace(wantStats)
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(want), statNames...); err != nil {
		t.Fatal(err)
	}
}

func TestScrapeOneStatsCallPerScrape(t *testing.T) {
	src := &fakeSource{}
	m := New(src)
	url := serve(t, m) + "/metrics"
	get(t, url)
	get(t, url)
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.calls != 2 {
		t.Fatalf("Stats called %d times for 2 scrapes, want 2", src.calls)
	}
}

func TestRuntimeAndProcessMetricsCarryLabels(t *testing.T) {
	m := New(&fakeSource{}, "digest", "b3:abc")
	body := get(t, serve(t, m)+"/metrics")
	for _, want := range []string{
		`go_goroutines{digest="b3:abc"}`,
		`go_sched_gomaxprocs_threads{digest="b3:abc"}`,
		`process_resident_memory_bytes{digest="b3:abc"}`,
		`process_cpu_seconds_total{digest="b3:abc"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape has no %s", want)
		}
	}
}

func TestObserveRead(t *testing.T) {
	m := New(&fakeSource{}, "digest", "b3:abc")
	m.ObserveRead(30*time.Microsecond, 4096, nil)      // first bucket
	m.ObserveRead(3*time.Millisecond, 128<<10, io.EOF) // a short read at the end: no error
	m.ObserveRead(20*time.Second, 0, fmt.Errorf("blocks: x: %w", b3.ErrMismatch))
	m.ObserveRead(time.Millisecond, 0, fmt.Errorf("fetch: %w", context.Canceled))
	m.ObserveRead(time.Millisecond, 0, syscall.EACCES)
	m.ObserveRead(time.Millisecond, 0, syscall.ENOSPC)
	m.ObserveRead(time.Millisecond, 100, syscall.Errno(0))

	want := `
# HELP pinfs_read_errors_total read(2) requests that failed, by the errno returned to the reader.
# TYPE pinfs_read_errors_total counter
pinfs_read_errors_total{digest="b3:abc",errno="EACCES"} 1
pinfs_read_errors_total{digest="b3:abc",errno="EINTR"} 1
pinfs_read_errors_total{digest="b3:abc",errno="EIO"} 1
pinfs_read_errors_total{digest="b3:abc",errno="ENOSPC"} 1
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "pinfs_read_errors_total"); err != nil {
		t.Fatal(err)
	}

	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, mf := range mfs {
		switch mf.GetName() {
		case "pinfs_read_duration_seconds":
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 7 {
				t.Errorf("latency count %d, want 7", h.GetSampleCount())
			}
			if got, want := h.GetSampleSum(), 20.00703; got < want-1e-9 || got > want+1e-9 {
				t.Errorf("latency sum %v, want %v", got, want)
			}
			b := h.GetBucket()
			if b[0].GetUpperBound() != 50e-6 || b[0].GetCumulativeCount() != 1 {
				t.Errorf("first latency bucket %v", b[0])
			}
			if last := b[len(b)-1]; last.GetUpperBound() < 10 || last.GetCumulativeCount() != 6 {
				t.Errorf("last latency bucket %v: want >= 10 s holding all but the 20 s read", last)
			}
			found++
		case "pinfs_read_size_bytes":
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 7 || h.GetSampleSum() != 4096+128<<10+100 {
				t.Errorf("size count %d sum %v", h.GetSampleCount(), h.GetSampleSum())
			}
			found++
		}
	}
	if found != 2 {
		t.Fatalf("found %d of the 2 read histograms", found)
	}
}

// TestErrnoClassMatchesFS checks that ObserveRead classes read-path errors
// as fs.Errno maps them for the kernel.
func TestErrnoClassMatchesFS(t *testing.T) {
	m := New(&fakeSource{})
	quiet := slog.New(slog.DiscardHandler)
	for _, err := range []error{
		context.Canceled,
		fmt.Errorf("fetch block 7: %w", context.DeadlineExceeded),
		fmt.Errorf("s3://b/k?versionId=v: %w", store.ErrAccessDenied),
		fmt.Errorf("s3://b/k?versionId=v: %w", store.ErrNotFound),
		fmt.Errorf("x: %w", store.ErrVersionMismatch),
		fmt.Errorf("blocks: %w", b3.ErrMismatch),
		fmt.Errorf("%w: %w", blocks.ErrClosed, context.Canceled),
		blocks.ErrClosed,
		io.ErrUnexpectedEOF,
		&net.OpError{Op: "read", Err: syscall.ECONNRESET}, // not the errno the reader sees
		errors.New("anything"),
	} {
		want := unix.ErrnoName(fs.Errno(err, quiet, "test"))
		if m.errCounter(err) != m.errs.WithLabelValues(want) {
			t.Errorf("%v: counted under another errno than fs.Errno's %s", err, want)
		}
	}
}

func BenchmarkObserveRead(b *testing.B) {
	m := New(&fakeSource{})
	errIO := fmt.Errorf("blocks: x: %w", b3.ErrMismatch)
	b.Run("ok", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			m.ObserveRead(time.Duration(i%1000)*time.Microsecond, 128<<10, nil)
		}
	})
	b.Run("error", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			m.ObserveRead(time.Duration(i%1000)*time.Microsecond, 0, errIO)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.ObserveRead(200*time.Microsecond, 128<<10, nil)
			}
		})
	})
}

func TestObserveReadDoesNotAllocate(t *testing.T) {
	m := New(&fakeSource{})
	errIO := fmt.Errorf("blocks: x: %w", b3.ErrMismatch)
	errIntr := fmt.Errorf("fetch: %w", context.Canceled)
	for name, err := range map[string]error{"ok": nil, "EIO": errIO, "EINTR": errIntr, "errno": syscall.EACCES, "EOF": io.EOF} {
		if a := testing.AllocsPerRun(1000, func() { m.ObserveRead(time.Millisecond, 4096, err) }); a != 0 {
			t.Errorf("%s: %v allocations per ObserveRead, want 0", name, a)
		}
	}
}

func TestServe(t *testing.T) {
	m := New(&fakeSource{st: sampleStats})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := m.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if tcp, ok := addr.(*net.TCPAddr); !ok || tcp.Port == 0 || !tcp.IP.IsLoopback() {
		t.Fatalf("bound address %v", addr)
	}
	base := "http://" + addr.String()
	if body := get(t, base+"/metrics"); !strings.Contains(body, "pinfs_bytes_served_total 123456") {
		t.Errorf("/metrics has no pinfs_bytes_served_total 123456:\n%s", body)
	}
	if body := get(t, base+"/debug/pprof/"); !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/ is not the pprof index:\n%s", body)
	}
	if body := get(t, base+"/debug/pprof/goroutine?debug=1"); !strings.Contains(body, "goroutine profile") {
		t.Errorf("/debug/pprof/goroutine:\n%.200s", body)
	}
	get(t, base+"/debug/pprof/cmdline")

	// A second Serve on the same address fails at once.
	if _, err := m.Serve(ctx, addr.String()); err == nil {
		t.Fatal("Serve on a busy address succeeded")
	}

	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", addr.String())
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still listening 5 s after ctx ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNewPanicsOnBadLabels(t *testing.T) {
	for _, labels := range [][]string{
		{"digest"},
		{"tier", "x"},
		{"errno", "x"},
		{"digest", "a", "digest", "b"},
		{"", "x"},
		{"bad-name", "x"},
		{"__name", "x"},
		{"1st", "x"},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%q) did not panic", labels)
				}
			}()
			New(&fakeSource{}, labels...)
		}()
	}
}
