package s3store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pinfs/pinfs/store"
)

// cpuTime is this process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// timeWait counts the sockets to port in TIME_WAIT: connections that this
// process closed rather than kept idle for reuse.
func timeWait(port string) int {
	n := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(l)
			if len(fs) > 3 && fs[3] == "06" && strings.HasSuffix(fs[2], ":"+port) {
				n++
			}
		}
	}
	return n
}

// inParallel runs f(i) for i in [0, n) on workers goroutines and returns
// the first error.
func inParallel(n, workers int, f func(i int, buf []byte) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			buf := make([]byte, 64<<10)
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i, buf); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// drain reads r to its end with buf and returns the byte count.
func drain(r io.Reader, buf []byte) (int64, error) {
	var total int64
	for {
		k, err := r.Read(buf)
		total += int64(k)
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// BenchmarkRealSmallGets fetches 2000 objects of 256 KiB from versitygw
// with 16 workers, through ReadRange (one ranged GET of the pinned
// version, as the block reader asks for a small member) and through the
// raw SDK client of make bench, alternately in each iteration, and
// reports the wall time and the client CPU per GET of each and their
// ratios: the SDK and store overhead of a small member.
func BenchmarkRealSmallGets(b *testing.B) {
	const n, size, workers = 2000, 256 << 10, 16
	srv, c := startReal(b)
	srv.CreateBucket(b, "small", true)
	raw := srv.RawClient()
	objs := make([]store.Object, n)
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	if err := inParallel(n, workers, func(i int, _ []byte) error {
		key := fmt.Sprintf("f/%05d", i)
		out, err := raw.PutObject(context.Background(), &s3.PutObjectInput{
			Bucket: aws.String("small"), Key: aws.String(key), Body: bytes.NewReader(data), ContentLength: aws.Int64(size)})
		if err != nil {
			return err
		}
		objs[i], err = store.NewVersion("small", key, aws.ToString(out.VersionId))
		return err
	}); err != nil {
		b.Fatal(err)
	}
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.Endpoint, "http://"), ":")
	portHex := fmt.Sprintf("%04X", atoi(b, port))

	viaStore := func(i int, buf []byte) error {
		r, err := c.ReadRange(context.Background(), objs[i], 0, size)
		if err != nil {
			return err
		}
		defer r.Close()
		got, err := drain(r, buf)
		if err == nil && got != size {
			err = fmt.Errorf("%v: %d bytes", objs[i], got)
		}
		return err
	}
	viaRaw := func(i int, buf []byte) error {
		o := objs[i]
		out, err := raw.GetObject(context.Background(), &s3.GetObjectInput{
			Bucket: aws.String(o.Bucket), Key: aws.String(o.Key), VersionId: aws.String(o.VersionID),
			Range: aws.String(fmt.Sprintf("bytes=0-%d", size-1))})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		got, err := drain(out.Body, buf)
		if err == nil && got != size {
			err = fmt.Errorf("%v: %d bytes", o, got)
		}
		return err
	}
	var wall, cpu [2]time.Duration
	var closed [2]int
	for b.Loop() {
		for k, f := range []func(int, []byte) error{viaRaw, viaStore} {
			tw, c0, t0 := timeWait(portHex), cpuTime(), time.Now()
			if err := inParallel(n, workers, f); err != nil {
				b.Fatal(err)
			}
			wall[k] += time.Since(t0)
			cpu[k] += cpuTime() - c0
			closed[k] += timeWait(portHex) - tw
		}
	}
	per := float64(b.N) * n
	b.ReportMetric(float64(wall[0].Milliseconds())/float64(b.N), "raw-ms")
	b.ReportMetric(float64(wall[1].Milliseconds())/float64(b.N), "store-ms")
	b.ReportMetric(float64(cpu[0].Microseconds())/per, "raw-cpu-µs/get")
	b.ReportMetric(float64(cpu[1].Microseconds())/per, "store-cpu-µs/get")
	b.ReportMetric(float64(wall[1])/float64(wall[0]), "store/raw-wall")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "store/raw-cpu")
	b.ReportMetric(float64(closed[1])/float64(b.N), "store-conns-closed")
	b.ReportMetric(float64(closed[0])/float64(b.N), "raw-conns-closed")
}

func atoi(tb testing.TB, s string) int {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		tb.Fatalf("port %q: %v", s, err)
	}
	return n
}
