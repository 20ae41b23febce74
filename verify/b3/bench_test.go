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
func benchMember(b *testing.B) ([]byte, b3.Sum, []byte) {
	b.Helper()
	const size = 16 << 20
	data := randomBytes(size, 600)
	root, ob, err := b3.Encode(bytes.NewReader(data), size)
	if err != nil {
		b.Fatal(err)
	}
	return data, root, ob
}

// BenchmarkVerifyBlock verifies 1 MiB blocks of a 16 MiB member: "b3" is
// the path pinfs uses (Verify), "bao" the bao package's VerifyChunk that
// Verify used before it walked the outboard itself. "parallel" runs Verify
// on every CPU, to set against b3sum --num-threads 2.
func BenchmarkVerifyBlock(b *testing.B) {
	const block = 1 << 20
	data, root, ob := benchMember(b)
	size := int64(len(data))
	n := len(data) / block
	b.Run("b3", func(b *testing.B) {
		b.SetBytes(block)
		for i := 0; b.Loop(); i++ {
			off := (i % n) * block
			if err := b3.Verify(root, ob, size, int64(off), data[off:off+block]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bao", func(b *testing.B) {
		b.SetBytes(block)
		for i := 0; b.Loop(); i++ {
			off := (i % n) * block
			if !bao.VerifyChunk(data[off:off+block], ob, b3.GroupLog, uint64(off), root) {
				b.Fatal("mismatch")
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetBytes(block)
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

// BenchmarkOf hashes 1 MiB and 1 GiB in one call.
func BenchmarkOf(b *testing.B) {
	for _, n := range []int{1 << 20, benchGiB} {
		b.Run(fmt.Sprintf("%dMiB", n>>20), func(b *testing.B) {
			data := gib()[:n]
			b.SetBytes(int64(n))
			for b.Loop() {
				b3.Of(data)
			}
		})
	}
}

// BenchmarkB3sum runs b3sum over a 1 GiB file in the page cache with one
// and two threads, and checks that it prints the digest Of computes. It
// fails when b3sum is missing: it is the baseline of the others.
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
			for b.Loop() {
				out, err := exec.Command(path, "--num-threads", fmt.Sprint(threads), "--no-names", file).Output()
				if err != nil {
					b.Fatal(err)
				}
				if got := strings.TrimSpace(string(out)); got != want {
					b.Fatalf("b3sum printed %q, want %s", got, want)
				}
			}
		})
	}
}
