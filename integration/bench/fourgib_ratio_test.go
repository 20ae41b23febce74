package bench

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// fourGiBVs1GiB adds issue 38's row for the 4 GiB member: the daemon's
// CPU per GB of its read (dm) against a 1 GiB member's read the same way
// in the same run: 1 GiB of random bytes pinned into a new local store,
// a new mount with --cache-mem 256MiB, page cache dropped, dd bs=1M.
// The loopback S3 1 GiB row, when this run measured it, is shown next to it.
func (b *bench) fourGiBVs1GiB(t *testing.T, dm measure) {
	const size = 1 << 30
	src, store := t.TempDir(), t.TempDir()
	if err := writeRandom(filepath.Join(src, "big1g.bin"), size, rand.NewChaCha8([32]byte{38, 1}), make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	d := b.pin(t, src, store, nil, "1 GiB local file (random bytes) into a local store, the 4 GiB member's baseline")
	os.RemoveAll(src)
	m := b.mount(t, "1 GiB member, cache-mem 256MiB (local store)", nil, d, store, t.TempDir(), "--cache-mem", "256MiB")
	dropCaches(t)
	one := b.dd(t, "pinfs 1 GiB member, local store, cache-mem 256MiB", filepath.Join(m.dir, "big1g.bin"), m.pid, size)
	b.finish(t, m)
	v4, v1 := dm.daemon/(float64(dm.bytes)/1e9), one.daemon/(float64(one.bytes)/1e9)
	other := fmt.Sprintf("1 GiB member read the same way: %.2f s/GB", v1)
	if s3, ok := b.measured("pinfs 1 GiB cold sequential (dd bs=1M)"); ok {
		other += fmt.Sprintf(" (the loopback S3 1 GiB cold row: %s s/GB)", perGB(s3.daemon, s3.bytes))
	}
	b.judge(row{scenario: "4 GiB member via dd, --cache-mem 256MiB, local store: daemon CPU per GB vs a 1 GiB member's", pinfs: fmt.Sprintf("%.2f s/GB", v4),
		other: other, cpu: perGB(dm.daemon, dm.bytes)}, v4/v1, false, targetFourGiBCPUVs1GiB, "")
}

// measured returns the last measurement of this run named name.
func (b *bench) measured(name string) (measure, bool) {
	for i := len(b.cpu) - 1; i >= 0; i-- {
		if b.cpu[i].name == name {
			return b.cpu[i], true
		}
	}
	return measure{}, false
}
