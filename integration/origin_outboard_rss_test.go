package integration

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"lukechampine.com/blake3/guts"

	"github.com/pinfs/pinfs/integration/s3test"
	"github.com/pinfs/pinfs/integration/tiertest"
	"github.com/pinfs/pinfs/verify/b3"
)

// outboardRSSBound is the growth of the origin's resident memory that 64
// outboard requests at once may cause, whatever the outboards hold: the
// bound docs/cluster.md ("What the origin promises a hostile client")
// states. Each holds 64 KiB of its outboard, about 4 MiB for 64; the rest
// is the margin of the race-enabled binary's runtime (shadow memory,
// goroutines, buffers). The origin that read each outboard whole held 1
// GiB a request.
const outboardRSSBound = 128 << 20

// TestOriginOutboardsBoundedRSS plants 64 sparse garbage "outboards" of
// about 1 GiB in a local store (no disk cost) under made-up digests, of
// three kinds: all zeros (a header of 0 bytes), a header claiming the size
// whose outboard is that long with a garbage root node, and a good root
// node over garbage children (answered 200, then cut). All 64 are asked
// for at once; none may be answered whole, and the origin's peak resident
// memory (VmHWM) may grow by at most outboardRSSBound (issue 37, finding 2).
func TestOriginOutboardsBoundedRSS(t *testing.T) {
	st := t.TempDir()
	outboardsRSS(t, nil, st, func(key string, head []byte, length int64) {
		p := filepath.Join(st, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, head, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, length); err != nil {
			t.Fatal(err)
		}
	})
}

// TestOriginOutboardsBoundedRSSOnS3 is TestOriginOutboardsBoundedRSS on
// versitygw, whose GET the origin streams (s3store's Open): each blob is
// put small and then made sparse in the posix backend's directory.
func TestOriginOutboardsBoundedRSSOnS3(t *testing.T) {
	s := s3test.Start(t)
	s.CreateBucket(t, "store", false)
	outboardsRSS(t, s.Env(), "s3://store/pinfs", func(key string, head []byte, length int64) {
		s.Put(t, "store", "pinfs/"+key, head)
		if err := os.Truncate(filepath.Join(s.DataDir, "store", "pinfs", filepath.FromSlash(key)), length); err != nil {
			t.Fatal(err)
		}
		out, err := s.Client(t).HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String("store"), Key: aws.String("pinfs/" + key)})
		if err != nil || aws.ToInt64(out.ContentLength) != length {
			t.Fatalf("versitygw does not serve the sparse blob: %v", err)
		}
	})
}

// outboardsRSS plants the outboards with put, runs the origin on the
// store st with env and asks for them all at once.
func outboardsRSS(t *testing.T, env []string, st string, put func(key string, head []byte, length int64)) {
	const n = 64
	const length = 8 + 64*(1<<24-1) // 1 GiB less 56 bytes: a whole number of nodes
	size := uint64(1<<24-1)*b3.GroupSize + 1
	keys := make([]string, n)
	for i := range keys {
		var d [32]byte
		rand.Read(d[:])
		var head []byte
		switch i % 3 {
		case 1: // a valid-looking header, a garbage root
			head = binary.LittleEndian.AppendUint64(nil, size)
			head = append(head, make([]byte, 64)...)
			rand.Read(head[8:])
		case 2: // a root that checks, over garbage
			head = binary.LittleEndian.AppendUint64(nil, size)
			var node [64]byte
			rand.Read(node[:])
			head = append(head, node[:]...)
			var l, r [8]uint32
			for k := range 8 {
				l[k] = binary.LittleEndian.Uint32(node[4*k:])
				r[k] = binary.LittleEndian.Uint32(node[32+4*k:])
			}
			cv := guts.ChainingValue(guts.ParentNode(l, r, &guts.IV, guts.FlagRoot))
			for k, w := range cv {
				binary.LittleEndian.PutUint32(d[4*k:], w)
			}
		}
		keys[i] = "bao/blake3/" + hex.EncodeToString(d[:])
		if head == nil {
			head = make([]byte, 8)
		}
		put(keys[i], head, length)
	}
	addr, srv := tiertest.Origin(t, pinfsBin, env, "--store", st, "--cache-dir", t.TempDir(), "--max-requests", strconv.Itoa(n))
	pid := srv.Process.Pid
	base := status(t, pid, "VmRSS")
	c := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxConnsPerHost: n, MaxIdleConnsPerHost: n}}
	var wg sync.WaitGroup
	answers := make([]string, n)
	start := make(chan struct{})
	for i, key := range keys {
		wg.Go(func() {
			<-start
			resp, err := c.Get("http://" + addr + "/" + key)
			if err != nil {
				answers[i] = "error before the answer"
				return
			}
			got, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			answers[i] = fmt.Sprintf("%d, %d of %d bytes, %v", resp.StatusCode, got, resp.ContentLength, err)
			if resp.StatusCode == 200 && err == nil && got == resp.ContentLength {
				t.Errorf("%s: answered whole: %s", key, answers[i])
			}
		})
	}
	close(start)
	wg.Wait()
	peak := status(t, pid, "VmHWM")
	t.Logf("origin VmRSS before %d MiB, VmHWM after %d MiB (growth %d MiB, bound %d MiB); answers: %s, %s, %s",
		base>>20, peak>>20, (peak-base)>>20, outboardRSSBound>>20, answers[0], answers[1], answers[2])
	if peak-base > outboardRSSBound {
		t.Fatalf("64 garbage outboards at once grew the origin's resident memory by %d MiB, more than %d MiB",
			(peak-base)>>20, outboardRSSBound>>20)
	}
}

// status returns the field (VmRSS, VmHWM) of /proc/PID/status in bytes.
func status(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			if f := strings.Fields(v); len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}
