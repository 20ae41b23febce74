package blocks

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/pinfs/pinfs/verify/b3"
)

// BenchmarkReadAtWarm reads 128 KiB at a time (a FUSE read) from a member
// whose blocks are all in the memory tier.
func BenchmarkReadAtWarm(b *testing.B) {
	e := newEnv(b)
	e.store.Quiet = true
	r := e.reader(Config{MemBytes: 64 << 20})
	m := e.member(16 * BlockSize)
	e.readAll(r, m, BlockSize)
	r.mem.Wait()
	const chunk = 128 << 10
	p := make([]byte, chunk)
	ctx := context.Background()
	b.SetBytes(chunk)
	b.ResetTimer()
	off := int64(0)
	for b.Loop() {
		if _, err := r.ReadAt(ctx, m, p, off); err != nil {
			b.Fatal(err)
		}
		off = (off + chunk) % m.Size
	}
	if st := r.Stats(); st.NetworkFetches != 16 {
		b.Fatalf("warm reads fetched: %+v", st)
	}
}

// BenchmarkReadAtCold reads whole blocks with no memory tier (the front
// that keeps the last blocks loaded, 16 MiB here, is smaller than the
// member), so that every read is a fetch from the in-memory fake store
// plus BLAKE3 verification.
func BenchmarkReadAtCold(b *testing.B) {
	e := newEnv(b)
	e.store.Quiet = true
	r := e.reader(Config{ReadaheadMax: -1})
	m := e.member(64 * BlockSize)
	p := make([]byte, BlockSize)
	ctx := context.Background()
	b.SetBytes(BlockSize)
	i := int64(0)
	for b.Loop() {
		if _, err := r.ReadAt(ctx, m, p, i*BlockSize); err != nil {
			b.Fatal(err)
		}
		i = (i + 1) % 64
	}
	if st := r.Stats(); st.MemHits != 0 {
		b.Fatalf("%d memory hits in a cold read", st.MemHits)
	}
}

// BenchmarkColdSequential reads 32 MiB members from start to end, one
// after the other, with 1 MiB Slices calls (a FUSE reader with 1 MiB
// requests, replies by writev), through one Reader whose memory tier
// (32 MiB) cannot keep a member until it comes round again: every block is
// a miss, fetched from the in-memory fake store in spans, verified and
// offered to the memory tier, as in a steady cold stream. cpu-s/GB is the
// process's CPU time (user + system) per GB read, the fake store's copies
// into the receive buffers included; sys-s/GB is the system part alone
// (page faults, futex wake-ups); fetched-% the blocks
// fetched from the store (100 when the stream is cold throughout).
func BenchmarkColdSequential(b *testing.B) {
	e := newEnv(b)
	e.store.Quiet = true
	const size = 32 * BlockSize
	var ms []*Member
	for range 5 {
		ms = append(ms, e.member(size))
	}
	r := e.reader(Config{MemBytes: 32 << 20})
	ctx := context.Background()
	read := func(m *Member) {
		for off := int64(0); off < size; off += BlockSize {
			if _, _, err := r.Slices(ctx, m, off, BlockSize); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Two rounds before the clock starts let the heap grow to its steady
	// size: the page faults of that growth are no cost per byte.
	for range 2 {
		for _, m := range ms {
			read(m)
		}
	}
	b.SetBytes(size)
	b.ReportAllocs()
	st0 := r.Stats()
	cpu0, sys0 := cpuTime()
	for i := 0; b.Loop(); i++ {
		read(ms[i%len(ms)])
	}
	cpu1, sys1 := cpuTime()
	st := r.Stats()
	gb := float64(b.N) * size / 1e9
	b.ReportMetric((cpu1-cpu0).Seconds()/gb, "cpu-s/GB")
	b.ReportMetric((sys1-sys0).Seconds()/gb, "sys-s/GB")
	b.ReportMetric(100*float64(st.NetworkFetches-st0.NetworkFetches)/float64(int64(b.N)*size/BlockSize), "fetched-%")
}

// BenchmarkVerifyOnly is the verification alone of the cold path's bytes,
// for reference: b3.Verify of every 1 MiB block of a 64 MiB member.
func BenchmarkVerifyOnly(b *testing.B) {
	e := newEnv(b)
	const size = 64 * BlockSize
	m := e.member(size)
	data, ob := e.data[m.Digest], e.obs.obs[m.Digest]
	b.SetBytes(size)
	cpu0, _ := cpuTime()
	for b.Loop() {
		for off := int64(0); off < size; off += BlockSize {
			if err := b3.Verify(m.Digest, ob, size, off, data[off:off+BlockSize]); err != nil {
				b.Fatal(err)
			}
		}
	}
	cpu1, _ := cpuTime()
	b.ReportMetric((cpu1-cpu0).Seconds()/(float64(b.N)*size/1e9), "cpu-s/GB")
}

// cpuTime returns the process's CPU time (user plus system) and the
// system part alone.
func cpuTime() (total, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), time.Duration(ru.Stime.Nano())
}

// BenchmarkShapedSequential reads a 1 GiB member cold from start to end
// with 1 MiB reads (a FUSE reader's) through a link that adds 20 ms before
// every response and carries 100 MB/s per request, as S3 does: the
// default readahead against smaller windows (16 blocks is what pinfs had
// before issue 23). MB/s is the reader's rate; each iteration is a new Reader.
func BenchmarkShapedSequential(b *testing.B) {
	e := newEnv(b)
	e.store.Quiet = true
	const size = 1 << 30
	m := e.member(size)
	const latency = 20 * time.Millisecond
	link, obs := shapedStore{e.store, latency, 100e6}, shapedOutboards{e.obs, latency}
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"window=16MiB", Config{ReadaheadMax: 16 * BlockSize}},
		{"window=32MiB", Config{ReadaheadMax: 32 * BlockSize}},
		{"window=64MiB", Config{ReadaheadMax: 64 * BlockSize}},
		{"window=default", Config{}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				cfg := c.cfg
				cfg.Objects, cfg.Outboards, cfg.MemBytes = link, obs, 64<<20
				r, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				for off := int64(0); off < size; off += BlockSize {
					if _, _, err := r.Slices(context.Background(), m, off, BlockSize); err != nil {
						b.Fatal(err)
					}
				}
				r.Close()
			}
		})
	}
}
