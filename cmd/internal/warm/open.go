package warm

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/store/memtarget"
	"github.com/pinfs/pinfs/store/metacache"
	"github.com/pinfs/pinfs/store/pool"
	"github.com/pinfs/pinfs/verify"
)

// Cache is a snapshot opened over a cache dir laid out as pinfs mount lays
// it out: verified manifests, member tables and outboards under
// <dir>/meta, disk-tier blocks under <dir>/blocks. What Warm puts there is
// what a later mount on the same dir reads without the store.
type Cache struct {
	Snapshot *verify.Snapshot
	Disk     *cache.Disk
	Reader   *blocks.Reader
	pool     *pool.Pool
}

// Tuning is the budgets of a warm: the disk tier's, and the window and
// memory budget of its block reader's loads (blocks.Config's ReadaheadMax
// and ReadaheadBudget; zero means their defaults). MemoryTarget is
// --memory-target (0: from the cgroup, else the defaults;
// store/memtarget), and ReadaheadBudgetSet says that ReadaheadBudget was
// given explicitly and wins over the target's split.
type Tuning struct {
	DiskBytes                     int64
	ReadaheadMax, ReadaheadBudget int64
	MemoryTarget                  int64
	ReadaheadBudgetSet            bool
}

// Open loads and verifies snapshot d through the metadata cache in dir,
// opens the disk tier with a budget of t.DiskBytes and a block reader over
// st that fills it, a window of parts in flight per member within the
// readahead budget. It has no memory tier: warm only fills the disk.
// The caller must Close the Cache.
func Open(ctx context.Context, st store.Store, d verify.Digest, dir string, t Tuning, log *slog.Logger) (*Cache, error) {
	meta := metacache.New(filepath.Join(dir, "meta"), st, metacache.WithLogger(log))
	snap, err := verify.Load(ctx, meta, d)
	if err != nil {
		return nil, err
	}
	sizes, err := t.memory()
	if err != nil {
		return nil, err
	}
	sizes.Log(log)
	disk, err := cache.OpenDisk(filepath.Join(dir, "blocks"), t.DiskBytes, cache.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("disk cache: %w", err)
	}
	bp, err := pool.New(sizes.Pool)
	if err != nil {
		disk.Close()
		return nil, err
	}
	cr, _ := st.(store.ContentReader) // a tier's: read by content
	var fb store.ContentReader        // a tier's fallback store, for blocks whose copies fail twice
	if f, ok := st.(interface{ Fallback() store.ContentReader }); ok {
		fb = f.Fallback()
	}
	r, err := blocks.New(blocks.Config{Objects: st, Content: cr, Fallback: fb, Outboards: meta, Disk: disk,
		ReadaheadMax: t.ReadaheadMax, ReadaheadBudget: sizes.Readahead, Pool: bp})
	if err != nil {
		bp.Close()
		disk.Close()
		return nil, err
	}
	return &Cache{Snapshot: snap, Disk: disk, Reader: r, pool: bp}, nil
}

// memory returns how a warm's memory is shared (memtarget.Plan): the
// snapshot loaded and the headroom on the heap, no memory tier, the
// readahead budget and the reserve in the pool.
func (t Tuning) memory() (memtarget.Sizes, error) {
	ra, raSet := t.ReadaheadBudget, t.ReadaheadBudgetSet
	if ra <= 0 {
		ra, raSet = blocks.DefaultReadaheadBudget, false
	}
	return memtarget.Plan(memtarget.Request{Target: t.MemoryTarget, Heap: memtarget.HeapInUse() + memtarget.Headroom,
		MemSet: true, Readahead: ra, ReadaheadSet: raSet})
}

// Close ends the block reader's fetches and closes the pool and the disk
// tier.
func (c *Cache) Close() error {
	err := c.Reader.Close()
	if perr := c.pool.Close(); err == nil {
		err = perr
	}
	if derr := c.Disk.Close(); err == nil {
		err = derr
	}
	return err
}
