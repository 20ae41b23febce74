package bench

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The fixture of the shaped 64-reader row (issue 38): 64 objects of 64
// MiB of random bytes under data/multi64/, pinned as one snapshot: the
// bytes of the 16-reader row (16 × 256 MiB), spread over 64 readers.
const (
	multi64Count = 64
	multi64Size  = 64 << 20
)

// multi64Streams are the raw client's concurrencies for the 64 objects.
var multi64Streams = []int{32, 64}

// readers64: 64 dd bs=1M at once, each reading a different member of a
// new mount with default flags, against the raw client's best parallel
// GET of the same 64 objects in 8 MiB parts; and the daemon's peak RSS
// against the memory bound its mount logs.
func (sh *shapedRun) readers64(t *testing.T) {
	objs, sizes := sh.putObjects(t, "multi64/", multi64Count, func(i int) string { return fmt.Sprintf("r-%02d.bin", i) },
		func(i int) []byte {
			data := make([]byte, multi64Size)
			rand.NewChaCha8([32]byte{38, 64, byte(i)}).Read(data)
			return data
		})
	d := sh.pin(t, "s3://data/multi64/", storeURL, sh.bench.env, "64 × 64 MiB")
	raw, rawCell := sh.rawBest(t, objs, sizes, multi64Streams, "64 × 64 MiB")

	name := "shaped: 64 sequential readers of 64 × 64 MiB members at once (default flags)"
	m := sh.mount(t, name, sh.env, d, storeURL, t.TempDir())
	members := make([]string, len(objs))
	for i, o := range objs {
		members[i] = o.member
	}
	sh.warmBucket(t, "data", objs...)
	s0 := sh.sample(m.pid)
	wall, cpu, err := ddEach(m.dir, members, multi64Size)
	pm := sh.done("pinfs "+name+" (64 × dd bs=1M)", s0, m.pid, multi64Count*multi64Size, cpu)
	if err != nil {
		t.Fatalf("reading the mount: %v", err)
	}
	pm.wall = wall
	sh.cpu[len(sh.cpu)-1] = pm
	r := concResult{m: pm, hwm: procStatus(m.pid, "VmHWM")}
	r.bound, r.boundOK = memoryBound(m.fullLog())
	sh.finish(t, m)

	sh.judge(row{scenario: "shaped: 64 sequential readers (dd bs=1M) of 64 different 64 MiB members at once: aggregate rate", pinfs: gbs(pm.gbps()),
		raw: rawCell, s3fs: "not run", target: fmt.Sprintf("≥ %.2f × raw", targetShaped64VsRaw), cpu: perGB(pm.daemon, pm.bytes)},
		pm.gbps()/raw.gbps(), true, targetShaped64VsRaw, "")
	sh.rssRow(row{scenario: "shaped: the same 64 readers: daemon peak RSS (VmHWM) vs the memory bound the mount logs", cpu: perGB(pm.daemon, pm.bytes)}, r)
}
