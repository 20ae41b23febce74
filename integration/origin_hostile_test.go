package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/tiertest"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/store/tier"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// Sizes of TestOriginSurvivesCyclingHints.
const (
	hostileSnapshots = 24     // more than the 16 the origin keeps
	hostileMembers   = 600    // per snapshot: 14,400 (snapshot, ordinal) pairs, more than the origin keeps copied (about 13,000)
	hostileRequests  = 100000 // block URLs with made-up digests
	hostileClients   = 8      // keep-alive connections
	hostileBatch     = 50     // requests pipelined at once on a connection
)

// Bounds of TestOriginSurvivesCyclingHints, with room to spare: the
// origin keeps 16 snapshots, loads 4 at a time and answers 64 requests at
// once, each table about 8 mappings; its code before issue 37 grew by
// about 7 mappings a request here, past 65,530 (vm.max_map_count) within
// the test.
const (
	hostileMaxNewMappings = 1500
	hostileMaxRSS         = 1 << 30 // the binary is built with -race
)

// TestOriginSurvivesCyclingHints: block URLs with made-up digests whose
// hints cycle over more snapshots than the origin keeps, from keep-alive
// clients straight to the origin (the tier passes each 404 on): every
// answer is a 404, and the origin's mappings and resident memory stay
// flat.
func TestOriginSurvivesCyclingHints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := localstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("a member's bytes\n")
	sum := b3.Of(body)
	if _, err := st.PutCAS(ctx, sum.String(), bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	var snaps []string
	for s := range hostileSnapshots {
		ms := make([]verify.Member, hostileMembers)
		for i := range ms {
			p := fmt.Sprintf("s%02d/f%05d", s, i)
			ms[i] = verify.Member{ID: p, Path: p, Size: int64(len(body)), Digest: sum.String(), CAS: sum.String()}
		}
		d, _, _, err := verifytest.PutSnapshot(ctx, st, ms, verify.Manifest{})
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, string(d))
	}
	addr, cmd := tiertest.Origin(t, pinfsBin, nil, "--store", dir, "--cache-dir", t.TempDir())
	pid := cmd.Process.Pid
	var next, bad atomic.Int64
	var firstBad atomic.Value
	fail := func(err error) {
		bad.Add(1)
		firstBad.CompareAndSwap(nil, err.Error())
	}
	// run sends requests from+1..n over hostileClients keep-alive
	// connections, each pipelining hostileBatch requests at a time: the
	// client's cost per request (the test binary is built with -race too)
	// stays small next to the origin's.
	run := func(from, n int64) {
		next.Store(from)
		var wg sync.WaitGroup
		for range hostileClients {
			wg.Go(func() {
				conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					fail(err)
					return
				}
				defer conn.Close()
				br := bufio.NewReader(conn)
				var req bytes.Buffer
				for {
					first := next.Add(hostileBatch) - hostileBatch + 1
					if first > n {
						return
					}
					last := min(first+hostileBatch-1, n)
					req.Reset()
					for k := first; k <= last; k++ {
						b := tier.Block{Hex: fmt.Sprintf("%016x%016x%016x%016x", mathrand.Uint64(), mathrand.Uint64(), mathrand.Uint64(), mathrand.Uint64()),
							Snapshot: snaps[k%hostileSnapshots], Member: mathrand.IntN(hostileMembers)}
						fmt.Fprintf(&req, "GET /%s?%s HTTP/1.1\r\nHost: %s\r\n\r\n", b.Path(), b.Query(), addr)
					}
					conn.SetDeadline(time.Now().Add(60 * time.Second))
					if _, err := conn.Write(req.Bytes()); err != nil {
						fail(err)
						return
					}
					for k := first; k <= last; k++ {
						resp, err := http.ReadResponse(br, nil)
						if err != nil {
							fail(fmt.Errorf("request %d: %w", k, err))
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusNotFound {
							fail(fmt.Errorf("request %d: %s", k, resp.Status))
						}
					}
				}
			})
		}
		wg.Wait()
	}
	// Warm up: every snapshot loaded once, the runtime's heap grown.
	run(0, 2000)
	baseMaps, baseRSS := procMappings(t, pid), procRSS(t, pid)
	start := time.Now()
	peakMaps, peakRSS := baseMaps, baseRSS
	for done := int64(2000); done < hostileRequests; {
		to := min(done+10000, hostileRequests)
		run(done, to)
		done = to
		peakMaps, peakRSS = max(peakMaps, procMappings(t, pid)), max(peakRSS, procRSS(t, pid))
		if bad.Load() > 0 {
			break
		}
	}
	t.Logf("%d requests in %v over %d snapshots: mappings %d -> peak %d, RSS %d MiB -> peak %d MiB",
		hostileRequests-2000, time.Since(start).Round(time.Millisecond), hostileSnapshots, baseMaps, peakMaps, baseRSS>>20, peakRSS>>20)
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d requests not answered 404, first %v", n, firstBad.Load())
	}
	if peakMaps-baseMaps > hostileMaxNewMappings {
		t.Errorf("the origin's mappings grew by %d (from %d), bound %d", peakMaps-baseMaps, baseMaps, hostileMaxNewMappings)
	}
	if peakRSS > hostileMaxRSS {
		t.Errorf("the origin's RSS reached %d MiB, bound %d MiB", peakRSS>>20, hostileMaxRSS>>20)
	}
	// Still serving, and ready.
	tiertest.WaitHTTP(t, "http://"+addr+"/-/ready")
}

// procMappings counts the mappings of process pid.
func procMappings(t testing.TB, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// procRSS returns the resident memory of process pid, in bytes.
func procRSS(t testing.TB, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}
