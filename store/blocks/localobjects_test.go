package blocks

import (
	"context"
	"testing"

	"github.com/pinfs/pinfs/store/cache"
)

// With LocalObjects, reads do not copy blocks into the disk tier (the
// store is as near as the tier), and Warm, asked to fill the tier, still
// does.
func TestLocalObjectsAreNotCopiedToDisk(t *testing.T) {
	e := newEnv(t)
	disk := diskDir(t, t.TempDir(), 64<<20)
	m := e.member(6*BlockSize + 99)
	r := e.reader(Config{Disk: disk, LocalObjects: true})
	e.readAll(r, m, 128<<10)
	disk.Flush()
	for i := range numBlocks(m.Size) {
		if disk.Has(cache.Key{Digest: m.Digest, Index: i}, m.Size) {
			t.Fatalf("block %d of a local store's member was copied to the disk tier", i)
		}
	}
	if err := r.Warm(context.Background(), m, nil); err != nil {
		t.Fatal(err)
	}
	for i := range numBlocks(m.Size) {
		if !disk.Has(cache.Key{Digest: m.Digest, Index: i}, m.Size) {
			t.Fatalf("Warm left block %d out of the disk tier", i)
		}
	}
	// Without it, the same reads fill the tier (the test can fail).
	m2 := e.member(3*BlockSize + 5)
	r2 := e.reader(Config{Disk: disk})
	e.readAll(r2, m2, 128<<10)
	disk.Flush()
	if !disk.Has(cache.Key{Digest: m2.Digest, Index: 0}, m2.Size) {
		t.Fatal("a remote store's block read was not copied to the disk tier")
	}
}
