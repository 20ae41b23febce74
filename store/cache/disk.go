package cache

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pinfs/pinfs/store/pool"

	"github.com/pinfs/pinfs/verify/b3"
)

// tmpPrefix starts the name of a member file that is still being written
// where O_TMPFILE is not available (diskfile.go). Such a file is never
// read, and a scan removes any left over by a crash.
const tmpPrefix = ".tmp-"

// The directory's totals, "<bytes> <blocks>", are kept in the extended
// attribute usageAttr of the directory, or, on a file system without user
// extended attributes, as the target of the symbolic link usageName in it.
// Neither is a regular file, so nothing that sums the directory's regular
// files counts them with the blocks.
const (
	usageAttr = "user.pinfs.usage"
	usageName = ".usage"
)

// Disk is the disk tier: the blocks of members under a directory, one
// file per member, bounded by the bytes the files hold and evicting the
// least recently used member first. It is safe for concurrent use, also by
// several Readers, and several Disks, in one process or in several, may
// share a directory: the budget holds for the directory.
//
// # Layout
//
// A member whose blocks are all there is one file, its whole-member file
// <dir>/<hex[:2]>/<hex> (MemberPath), of exactly the member's bytes, mode
// 0400, which the FUSE open path can hand to the kernel after verifying
// it. A member with blocks missing has a partial file <hex>.part instead
// (mode 0600, sparse): each block present at its offset in the member, and
// past the data a trailer with the member's size and one bit per block
// (diskmember.go). Setting the last bit completes it: the writer truncates
// it to the member's size, makes it 0400 and renames it to <hex>. A member
// of one block is written straight as its whole-member file. Files of the
// earlier layout, one per block (<hex>-<index>), are removed by the first
// listing: the tier is a cache, and a remount fetches them again.
//
// The directory is the index: Get and Has look for the member's files, so
// a block another process wrote is found. Get does not verify: the bytes
// are whatever the file holds, and the caller verifies them and calls
// Remove for a block that fails. Get refreshes a partial file's
// modification time (the eviction order) only when it is older than
// touchAge, and a whole-member file's only when it is older than
// WholeTouchAge, an hour: the open path verifies that file against its
// times, and touches it itself as often (store/blocks Backing).
//
// # Write-behind
//
// Put queues the block and returns; a writer goroutine per Disk writes the
// queue in batches (diskwriter.go). Get and Has see a queued block at once;
// a Put that finds more than maxQueued bytes waiting waits up to
// queueWait for room (so a stream faster than the disk slows its own
// fetches down instead of leaving holes in the cache), then drops the block
// and counts it (DiskStats.Dropped); Flush waits for the writes queued before
// it, and Close flushes. The writer writes a member of one block to an
// unnamed file (O_TMPFILE) in its directory and links it under its name
// once it is whole, or, where the file system has no O_TMPFILE, to a
// temporary file that it renames (diskfile.go). It writes the blocks of a
// larger member into the partial file under the directory's lock, data
// first, then the bits (diskpart.go), so a bit is never set before its
// block's bytes are in the file and no whole-member name is ever seen
// before the file is whole. Data is not fsynced: after a crash a block may
// be empty or torn, which verification catches.
//
// # Shared accounting
//
// The writer (once per batch of up to maxBatch blocks), Remove and
// eviction hold an exclusive flock on the directory and keep the
// directory's totals in an extended attribute of the directory
// (user.pinfs.usage; <dir>/.usage, a symbolic link, where the file system
// has none): the bytes of the blocks present, and their number. When a Put
// would take the directory over its budget, the Disk lists the directory and
// removes the member files, whole or partial, with the oldest modification
// times down to a low-water mark of 7/8 of the budget, so that listings
// are rare. A listing also corrects totals that drifted (a crash between
// a rename and the update of the totals, files removed by hand). Disks that
// share a directory with different budgets each enforce their own when
// they write; the smallest wins.
//
// # Failures
//
// The tier is a cache: writing it is best effort. A directory that cannot
// be created disables the tier; a directory that cannot be written serves
// the blocks it holds. A Put that fails is counted (DiskStats.WriteErrors)
// and the first failure is logged; reads go on from the store.
type Disk struct {
	dir   string
	limit int64
	log   *slog.Logger

	// mu serialises this Disk's holders of the directory's flock: flock
	// does not exclude two users of one open directory.
	mu   sync.Mutex
	lock *os.File // the directory, opened to flock it; nil when disabled

	// bytes and blocks are the directory's totals as last seen under the
	// lock.
	bytes, blocks atomic.Int64

	hits, misses, evictions, writes, removed, writeErrors, dropped atomic.Int64
	warned                                                         atomic.Bool
	noTmpfile                                                      atomic.Bool // the directory cannot take O_TMPFILE files (diskfile.go)

	// The write-behind queue (diskwriter.go). wmu guards the fields
	// below it; wcond signals a change of fifo, done or closing. A writer
	// holding the directory's lock may take wmu, never the reverse.
	wmu        sync.Mutex
	wcond      sync.Cond
	queued     map[Key]*pending // blocks Put and not yet written, by key
	fifo       []*pending       // the same, in the order of Put, not yet taken by the writer
	qbytes     int64            // bytes in queued
	enq, done  uint64           // seq of the last Put queued, of the last written or failed
	closing    bool
	writerDone chan struct{} // closed when the writer returns; nil before the first Put
	queueWait  time.Duration // how long a Put waits for room in a full queue

	beforeBatch func() // a test's hook, run by the writer before each batch
}

// DiskStats counts the disk tier's activity. Bytes and Blocks are the
// directory's, shared with any other Disk there; the rest are this Disk's.
type DiskStats struct {
	Hits, Misses int64
	Bytes        int64 // bytes held now in the directory
	Blocks       int64 // blocks held now in the directory
	Evictions    int64 // blocks evicted to stay within the budget (with their members)
	Writes       int64 // blocks written
	Removed      int64 // blocks, or whole member files, dropped by Remove(Member) or found unreadable
	WriteErrors  int64 // blocks that could not be written
	Dropped      int64 // blocks not written because the write queue was full
}

// DiskOption configures OpenDisk.
type DiskOption func(*Disk)

// WithLogger makes the tier log to l: a directory it cannot use, and the
// first write that fails. The default discards.
func WithLogger(l *slog.Logger) DiskOption {
	return func(d *Disk) {
		if l != nil {
			d.log = l
		}
	}
}

// OpenDisk opens the disk tier in dir with a budget of limit bytes,
// creating dir if needed. It lists dir to correct the directory's totals,
// removes temporary files abandoned by an earlier process, and evicts down
// to limit. A limit <= 0 disables the tier: dir is not touched, Get always
// misses and Put does nothing.
//
// A directory that cannot be created or opened disables the tier, and one
// that cannot be written gives a tier that only serves the blocks already
// there; both are logged as warnings, not returned: the mount serves from
// the store all the same. The only error is an empty dir.
func OpenDisk(dir string, limit int64, opts ...DiskOption) (*Disk, error) {
	d := &Disk{dir: dir, limit: limit, log: slog.New(slog.DiscardHandler), queueWait: queueWait}
	d.wcond.L = &d.wmu
	for _, o := range opts {
		o(d)
	}
	if limit <= 0 {
		return d, nil
	}
	if dir == "" {
		return nil, errors.New("cache: disk tier: no directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return d.disable(err), nil
	}
	lock, err := os.Open(dir)
	if err != nil {
		return d.disable(err), nil
	}
	d.lock = lock
	var werr error
	err = d.locked(func(t *totals) error {
		if err := d.evictLocked(t, 0, d.limit, ""); err != nil {
			return err
		}
		werr = d.writeUsage(*t) // also tells whether the directory can be written
		return nil
	})
	if err != nil {
		d.lock.Close()
		d.lock = nil
		return d.disable(err), nil
	}
	if werr != nil {
		d.warned.Store(true)
		d.writeErrors.Add(1)
		d.log.Warn("disk cache: the directory cannot be written: blocks already there are served, new ones are not kept",
			"dir", dir, "err", werr)
	}
	return d, nil
}

// disable turns d into a disabled tier after err, and logs it.
func (d *Disk) disable(err error) *Disk {
	d.log.Warn("disk cache disabled: its directory cannot be used; reads are served from the store",
		"dir", d.dir, "err", err)
	d.limit = 0
	return d
}

// Close writes the blocks still queued and releases the directory. The
// tier must not be used afterwards.
func (d *Disk) Close() error {
	if d == nil {
		return nil
	}
	d.stopWriter()
	if d.lock == nil {
		return nil
	}
	return d.lock.Close()
}

// Dir returns the tier's directory.
func (d *Disk) Dir() string { return d.dir }

// Limit returns the tier's budget in bytes (0: the tier is disabled).
func (d *Disk) Limit() int64 {
	if !d.enabled() {
		return 0
	}
	return d.limit
}

func (d *Disk) enabled() bool { return d != nil && d.limit > 0 }

// partPath returns the name of dg's partial file.
func (d *Disk) partPath(dg b3.Sum) string { return d.MemberPath(dg) + partSuffix }

// Put queues b as k's block, of a member of size bytes, for the tier's
// writer and returns; it does nothing for a block larger than the whole
// budget. b must be the block's bytes, of its length, and must not be
// modified afterwards. Get and Has see a queued block at once. The writer
// evicts least recently used members first when the directory would go
// over its budget; a write that fails is counted and, the first time,
// logged, and leaves the tier as it was. When more than maxQueued bytes
// wait, Put waits up to queueWait for room, then drops the block
// (DiskStats.Dropped). Flush waits for the queued writes.
//
// A member larger than the budget can never be whole in the tier; its
// blocks are kept in its partial file all the same (random reads of it
// hit), and eviction treats that file like any other, so it may be the
// one removed to make room for its own next block.
func (d *Disk) Put(k Key, size int64, b []byte) error {
	return d.put(k, size, b, nil)
}

// PutBlock is Put of a pool block: the write-behind queue holds a
// reference (pool.DiskQueue) until the block is written or dropped, so
// the caller may release its own at once. While a load of the pool waits
// for a slot (pool.Short) the block is dropped instead (DiskStats.Dropped).
func (d *Disk) PutBlock(k Key, size int64, blk *pool.Block) error {
	return d.put(k, size, blk.Bytes(), blk)
}

// put is Put of b, the bytes of blk if it is not nil.
func (d *Disk) put(k Key, size int64, b []byte, blk *pool.Block) error {
	if !d.enabled() || int64(len(b)) > d.limit || len(b) == 0 {
		return nil
	}
	if int64(len(b)) != blockLen(size, k.Index) {
		return fmt.Errorf("cache: block %v of a member of %d bytes: %d bytes, want %d", k, size, len(b), blockLen(size, k.Index))
	}
	if d.lock == nil {
		return d.writeFailed(k, errors.New("the directory cannot be written"))
	}
	if blk != nil {
		if blk.Slotted() && blk.Pool().Short() {
			// A load waits for a slot: the cache copy is the holder
			// that can do without one.
			d.dropped.Add(1)
			return nil
		}
		blk.Retain(pool.DiskQueue)
	}
	if !d.enqueue(k, size, b, blk) {
		d.dropped.Add(1)
	}
	return nil
}

// writeFailed counts a Put of k that failed with err, logs the first, and
// returns err wrapped.
func (d *Disk) writeFailed(k Key, err error) error {
	d.writeErrors.Add(1)
	if d.warned.CompareAndSwap(false, true) {
		d.log.Warn("disk cache: cannot store blocks; reads go on from the store (logged once, counted in pinfs_disk_cache_write_errors_total)",
			"dir", d.dir, "err", err)
	}
	return fmt.Errorf("cache: writing block %v: %w", k, err)
}

// MemberPath returns the name of the whole-member file of the member with
// content digest dg: <dir>/<hex[:2]>/<hex>, a file of exactly the member's
// bytes, mode 0400, once all its blocks are in the tier. The file may be
// missing, partial or damaged: the tier verifies nothing, and its caller
// verifies the whole file before it trusts it (store/blocks's Backing).
func (d *Disk) MemberPath(dg b3.Sum) string {
	h := dg.Hex()
	return filepath.Join(d.dir, h[:2], h)
}

// Stats returns the tier's counters.
func (d *Disk) Stats() DiskStats {
	if d == nil {
		return DiskStats{}
	}
	return DiskStats{
		Hits: d.hits.Load(), Misses: d.misses.Load(),
		Bytes: d.bytes.Load(), Blocks: d.blocks.Load(),
		Evictions: d.evictions.Load(), Writes: d.writes.Load(), Removed: d.removed.Load(),
		WriteErrors: d.writeErrors.Load(), Dropped: d.dropped.Load(),
	}
}
