package blocks

import (
	"context"
	"testing"
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

// BenchmarkReadAtCold reads whole blocks with no cache tier, so that every
// read is a fetch from the in-memory fake store plus BLAKE3 verification.
func BenchmarkReadAtCold(b *testing.B) {
	e := newEnv(b)
	e.store.Quiet = true
	r := e.reader(Config{Readahead: -1})
	m := e.member(16 * BlockSize)
	p := make([]byte, BlockSize)
	ctx := context.Background()
	b.SetBytes(BlockSize)
	i := int64(0)
	for b.Loop() {
		if _, err := r.ReadAt(ctx, m, p, i*BlockSize); err != nil {
			b.Fatal(err)
		}
		i = (i + 1) % 16
	}
}
