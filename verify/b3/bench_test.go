package b3_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"lukechampine.com/blake3"
	"lukechampine.com/blake3/bao"

	"github.com/pinfs/pinfs/verify/b3"
)

// The benchmarks in this file report the speed of the verification path
// next to b3sum's over the same bytes, so that ratios come from one run:
//
//	go test -run '^$' -bench 'Verify|Of|B3sum' -count 3 ./verify/b3/
//
// b3sum is the Rust reference implementation (Debian package b3sum), the
// "verification limit" of issue 10.

const benchGiB = 1 << 30

var (
	gibOnce sync.Once
	gibData []byte
)

// gib returns 1 GiB of reproducible pseudo-random bytes, made once.
func gib() []byte {
	gibOnce.Do(func() { gibData = randomBytes(benchGiB, 1000) })
	return gibData
}

// benchMember returns a 16 MiB member, its digest and outboard.
func benchMember(b testing.TB) ([]byte, b3.Sum, []byte) {
	if b != nil {
		b.Helper()
	}
	const size = 16 << 20
	data := randomBytes(size, 600)
	root, ob, err := b3.Encode(bytes.NewReader(data), size)
	if err != nil {
		b.Fatal(err)
	}
	return data, root, ob
}

// BenchmarkVerifyBlock verifies 1 MiB blocks of a 16 MiB member, on one
// goroutine and on every CPU ("parallel", to set against b3sum
// --num-threads 2).
func BenchmarkVerifyBlock(b *testing.B) {
	const block = 1 << 20
	data, root, ob := benchMember(b)
	size := int64(len(data))
	n := len(data) / block
	b.Run("serial", func(b *testing.B) {
		b.SetBytes(block)
		defer reportCPU(b, block)()
		for i := 0; b.Loop(); i++ {
			off := (i % n) * block
			if err := b3.Verify(root, ob, size, int64(off), data[off:off+block]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bao", func(b *testing.B) { // what Verify called before
		b.SetBytes(block)
		defer reportCPU(b, block)()
		for i := 0; b.Loop(); i++ {
			off := (i % n) * block
			if !bao.VerifyChunk(data[off:off+block], ob, b3.GroupLog, uint64(off), root) {
				b.Fatal("mismatch")
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetBytes(block)
		defer reportCPU(b, block)()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				off := (i % n) * block
				if err := b3.Verify(root, ob, size, int64(off), data[off:off+block]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkOf hashes a small member, 1 MiB and 1 GiB in one call, with Of
// and with lukechampine.com/blake3's Sum256, which Of used before.
func BenchmarkOf(b *testing.B) {
	for _, n := range []int{256 << 10, 1 << 20, benchGiB} {
		for _, impl := range []struct {
			name string
			sum  func([]byte) b3.Sum
		}{{"b3", b3.Of}, {"lukechampine", func(p []byte) b3.Sum { return blake3.Sum256(p) }}} {
			b.Run(fmt.Sprintf("%dKiB/%s", n>>10, impl.name), func(b *testing.B) {
				data := gib()[:n]
				b.SetBytes(int64(n))
				defer reportCPU(b, int64(n))()
				for b.Loop() {
					impl.sum(data)
				}
			})
		}
	}
}

// reportCPU starts counting the process's CPU time; the function it
// returns reports it as "cpu-ms/GB" for ops of n bytes, which, unlike
// ns/op, counts the work of every goroutine.
func reportCPU(b *testing.B, n int64) func() {
	start := processCPU()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(processCPU()-start)/1e6/(float64(n)*float64(b.N)/1e9), "cpu-ms/GB")
		}
	}
}

// childCPU is the CPU time, user and system, of the process's waited-for
// children.
func childCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU is the CPU time, user and system, the process has used.
func processCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkB3sum runs b3sum over a 1 GiB file in the page cache with one
// and two threads, and checks that it prints the digest Of computes. It
// fails when b3sum is missing: it is the baseline of the others.
// cpu-ms/GB is b3sum's own CPU time (1 GiB per op, near enough a GB).
func BenchmarkB3sum(b *testing.B) {
	path, err := exec.LookPath("b3sum")
	if err != nil {
		b.Fatal("b3sum (Debian package b3sum) is needed as the baseline:", err)
	}
	file := filepath.Join(b.TempDir(), "gib")
	if err := os.WriteFile(file, gib(), 0o600); err != nil {
		b.Fatal(err)
	}
	want := b3.Of(gib()).Hex()
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			b.SetBytes(benchGiB)
			start := childCPU()
			for b.Loop() {
				out, err := exec.Command(path, "--num-threads", fmt.Sprint(threads), "--no-names", file).Output()
				if err != nil {
					b.Fatal(err)
				}
				if got := strings.TrimSpace(string(out)); got != want {
					b.Fatalf("b3sum printed %q, want %s", got, want)
				}
			}
			b.ReportMetric(float64(childCPU()-start)/1e6/float64(b.N), "cpu-ms/GB")
		})
	}
}
