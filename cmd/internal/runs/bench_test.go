package runs

import (
	"math/rand/v2"
	"testing"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// BenchmarkShow1M is `pinfs run show` (without reading the record) of a
// run that read every member of a 1M-member S3 snapshot in full, in path
// order and shuffled, recorded as 60 deltas: decoding and unioning the
// deltas, summarising, and the consumed digest. The target is 2 s.
func BenchmarkShow1M(b *testing.B) {
	const n, deltas = 1_000_000, 60
	tab := verify.NewTable(verifytest.Members(n, verifytest.S3, 1))
	for _, order := range []string{"path", "shuffled"} {
		b.Run("order="+order, func(b *testing.B) {
			perm := make([]uint32, n)
			for i := range perm {
				perm[i] = uint32(i)
			}
			if order == "shuffled" {
				rand.New(rand.NewPCG(9, 9)).Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
			}
			run := &runrecord.Run{RunID: "bench", Digest: testDigest}
			for k := range deltas {
				d := consumed.NewSet()
				d.Opened.AddMany(perm[k*n/deltas : (k+1)*n/deltas])
				d.Full.AddMany(perm[k*n/deltas : (k+1)*n/deltas])
				run.Events = append(run.Events, consumedEvent(k, "h", 1, d))
			}
			for b.Loop() {
				r, err := Show(run, tab, at(0), dead, false)
				if err != nil || r.Consumed.MembersFull != n {
					b.Fatalf("%v, %+v", err, r.Consumed.Summary)
				}
			}
		})
	}
}
