package consumed

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pinfs/pinfs/verify"
)

// syntheticTable returns a table of n members shaped like the bench's
// synthetic snapshot (integration/bench): 50-150 KB each, 95% train.
func syntheticTable(n int) *verify.Table {
	r := rand.New(rand.NewChaCha8([32]byte{4}))
	ms := make([]verify.Member, n)
	trainShards := n / 1000 * 95 / 100
	for i := range ms {
		shard, split := i/1000, "train"
		if shard >= trainShards {
			shard, split = shard-trainShards, "val"
		}
		p := fmt.Sprintf("%s/shard-%04d/sample-%06d.jpg", split, shard, i)
		ms[i] = verify.Member{ID: p, Path: p, Split: split, Size: 50_000 + r.Int64N(100_000), Digest: "blake3:00"}
	}
	return verify.NewTable(ms)
}

// BenchmarkRecordSize1M reads every member of a 1M-member table in full,
// in path order and shuffled (and the first half of each, shuffled), through a Tracker that writes 60 deltas
// evenly (each while a few members are half read, as a flush in the
// middle of reads would), and reports the deltas' total text size, the
// time to Decode and Union them all, and the time to Summarize the union.
func BenchmarkRecordSize1M(b *testing.B) {
	const n, deltas, inflight = 1_000_000, 60, 8
	tab := syntheticTable(n)
	for _, order := range []string{"path", "shuffled", "shuffled-half"} {
		b.Run("order="+order, func(b *testing.B) {
			perm := make([]int, n)
			for i := range perm {
				perm[i] = i
			}
			part := int64(1) // the share of each member read: all, or half
			if order == "shuffled-half" {
				part = 2
			}
			if order != "path" {
				r := rand.New(rand.NewPCG(3, 3))
				r.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
			}
			var total int
			var decode, summarize, delta time.Duration
			for b.Loop() {
				tr := NewTracker(tab)
				var texts []string
				flush := func() {
					t0 := time.Now()
					texts = append(texts, tr.Delta().Encode())
					delta += time.Since(t0)
				}
				for k, i := range perm {
					tr.Opened(i)
					size := tab.Size(i) / part
					for off := int64(0); off < size; off += 128 << 10 {
						tr.Read(i, off, 128<<10)
					}
					if (k+1)*deltas/n != k*deltas/n && k+1 < n { // 59 flushes, then the last
						for _, j := range perm[k+1 : min(n, k+1+inflight)] {
							tr.Opened(j)
							tr.Read(j, 0, tab.Size(j)/2)
						}
						flush()
					}
				}
				flush()
				total = 0
				for _, t := range texts {
					total += len(t)
				}
				t0 := time.Now()
				u, dec := NewSet(), NewDecoder(tab)
				for _, t := range texts {
					d, err := dec.Decode(t)
					if err != nil {
						b.Fatal(err)
					}
					u.Union(d)
				}
				decode += time.Since(t0)
				if !equal(u, tr.Set()) || u.Opened.GetCardinality() != n || part == 1 && u.Full.GetCardinality() != n {
					b.Fatalf("union of the deltas: %d opened, %d full, %d parts; want all %d read", u.Opened.GetCardinality(), u.Full.GetCardinality(), len(u.Parts), n)
				}
				t0 = time.Now()
				sum := u.Summarize(tab)
				summarize += time.Since(t0)
				if sum.MembersOpened != n || part == 1 && sum.MembersFull != n {
					b.Fatalf("summary: %d members opened, %d full; want %d", sum.MembersOpened, sum.MembersFull, n)
				}
				if len(texts) != deltas {
					b.Fatalf("%d deltas, want %d", len(texts), deltas)
				}
			}
			b.ReportMetric(float64(total), "record-bytes")
			b.ReportMetric(float64(decode.Milliseconds())/float64(b.N), "decode+union-ms")
			b.ReportMetric(float64(summarize.Milliseconds())/float64(b.N), "summarize-ms")
			b.ReportMetric(float64(delta.Milliseconds())/float64(b.N), "deltas-ms")
		})
	}
}
