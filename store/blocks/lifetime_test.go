package blocks

import (
	"bytes"
	"context"
	"testing"

	"github.com/pinfs/pinfs/store/pool/pooltest"

	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/store/pool"
)

// envDisk returns a new env and a disk tier of 1 GiB in a temp dir,
// closed at cleanup.
func envDisk(t *testing.T) (*env, *cache.Disk) {
	t.Helper()
	disk := diskDir(t, t.TempDir(), 1<<30)
	t.Cleanup(func() { disk.Close() })
	return newEnv(t), disk
}

// TestHeldBlocksOutliveChurn holds what a FUSE reply, a memory-tier entry
// and a queued disk write hold (the slices Slices returned, a block the
// memory tier handed out, the blocks a read queued for the disk tier),
// then pushes many more blocks through every tier, and checks that the
// held bytes never change: a buffer that is reused (a pool, a recycled
// fetch buffer) while one of them still holds it fails here. Run it with
// -race.
func TestHeldBlocksOutliveChurn(t *testing.T) {
	e, disk := envDisk(t)
	// A pool just large enough for the tiers, the budget and a few
	// flights, so that the churn below reuses every slot it can: one
	// freed while something still held it would be overwritten (and,
	// built with pooldebug, the Get reusing it would panic on a write
	// through a stale slice).
	p := pooltest.New(t, 32)
	r := e.reader(Config{MemBytes: 2 * BlockSize, Disk: disk, ReadaheadMax: 2 * BlockSize, ReadaheadBudget: 4 * BlockSize,
		SpanBlocks: 2, Pool: p})
	ctx := context.Background()

	held := e.member(4*BlockSize + 123)
	src := e.data[held.Digest]
	// A reply: the slices of a read across three blocks.
	reply, n, err := r.Slices(ctx, held, BlockSize/2, 2*BlockSize+10)
	if err != nil || n != 2*BlockSize+10 {
		t.Fatalf("Slices: %d bytes, %v", n, err)
	}
	// A memory-tier entry, as a later read would get it.
	entry, ok := r.memBlock(held, 3)
	if !ok {
		if _, err := r.ReadAt(ctx, held, make([]byte, 1), 3*BlockSize); err != nil {
			t.Fatal(err)
		}
		if entry, ok = r.memBlock(held, 3); !ok {
			t.Fatal("block 3 is not in the memory tier after a read of it")
		}
	}

	// Churn: other members through the memory tier, the front and the
	// disk queue, read sequentially and at random.
	for range 8 {
		m := e.member(12*BlockSize + 7)
		e.readAll(r, m, 128<<10)
		for _, off := range []int64{7 * BlockSize, 1, 11 * BlockSize, 3 * BlockSize} {
			if _, err := r.ReadAt(ctx, m, make([]byte, 4096), off); err != nil {
				t.Fatal(err)
			}
		}
	}
	r.mem.Wait()
	disk.Flush()
	if st := p.Stats(); st.Gets < 3*int64(st.Slots) {
		t.Fatalf("the churn took %d slots of a pool of %d: too few to reuse them all", st.Gets, st.Slots)
	}

	want := src[BlockSize/2 : BlockSize/2+2*BlockSize+10]
	if got := bytes.Join(reply.Vecs(), nil); !bytes.Equal(got, want) {
		t.Fatalf("the bytes a reply held changed while it held them (%d bytes)", len(got))
	}
	if !bytes.Equal(entry.Bytes(), src[3*BlockSize:4*BlockSize]) {
		t.Fatal("the bytes of a memory-tier entry changed while it was held")
	}
	reply.Release()
	entry.Release(pool.Reader)
	for i := int64(0); i < numBlocks(held.Size); i++ {
		b, ok := disk.Get(key(held, i), held.Size)
		if !ok {
			continue // not put on disk (a random read) or evicted
		}
		off, bn := blockRange(held, i)
		if !bytes.Equal(b, src[off:off+bn]) {
			t.Fatalf("block %d went to the disk tier with other bytes than its own", i)
		}
	}
}
