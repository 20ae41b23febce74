package blocks

import (
	"context"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/cache"
)

// casMember is e.member read by content (a local store's member).
func casMember(e *env, size int64) *Member {
	m := e.member(size)
	obj := store.Object{CAS: m.Digest.String()}
	e.store.mu.Lock()
	e.store.objs[obj] = e.store.objs[m.Object]
	e.store.mu.Unlock()
	m.Object = obj
	return m
}

// With LocalCAS, reads of content-addressed members do not copy blocks
// into the disk tier (the store is as near as the tier), and Warm, asked
// to fill the tier, still does; members read by version are copied.
func TestLocalCASIsNotCopiedToDisk(t *testing.T) {
	e := newEnv(t)
	disk := diskDir(t, t.TempDir(), 64<<20)
	m := casMember(e, 6*BlockSize+99)
	r := e.reader(Config{Disk: disk, LocalCAS: true})
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
	// A member by version, through the same Reader, is copied (the test
	// can fail).
	m2 := e.member(3*BlockSize + 5)
	e.readAll(r, m2, 128<<10)
	disk.Flush()
	if !disk.Has(cache.Key{Digest: m2.Digest, Index: 0}, m2.Size) {
		t.Fatal("a remote store's block read was not copied to the disk tier")
	}
}
