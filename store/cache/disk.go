package cache

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/verify/b3"
)

// tmpPrefix starts the name of a block file that is still being written
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

// Disk is the disk tier: one file per block under a directory, at
// <dir>/<hex[:2]>/<hex>-<index>, bounded by the sum of the files' sizes and
// evicting the least recently used block first. It is safe for concurrent
// use, also by several Readers, and several Disks, in one process or in
// several, may share a directory: the budget holds for the directory.
//
// The directory is the index: Get and Has look for the block's file, so
// a block another process wrote is found. Get does not verify: the bytes
// are whatever the file holds, and the caller verifies them and calls
// Remove for a block that fails. Get refreshes a file's modification time
// (the eviction order) only when it is older than touchAge.
//
// # Write-behind
//
// Put queues the block and returns; a writer goroutine per Disk writes the
// queue in batches (diskwriter.go). Get and Has see a queued block at once;
// a Put that finds more than maxQueued bytes waiting waits up to
// queueWait for room (so a stream faster than the disk slows its own
// fetches down instead of leaving holes in the cache), then drops the block
// and counts it (DiskStats.Dropped); Flush waits for the writes queued before
// it, and Close flushes. The writer writes each block to an unnamed file
// (O_TMPFILE) in the block's directory and links it under the block's
// name once it is whole, or, where the file system has no O_TMPFILE, to a
// temporary file that it renames (diskfile.go), so no partial block is
// ever visible under a block's name. Data is not fsynced: after a crash a
// block may be empty or torn, which verification catches. The layout on
// disk is the one earlier versions wrote and read.
//
// # Shared accounting
//
// The writer (once per batch of up to maxBatch blocks), Remove and
// eviction hold an exclusive flock on the directory and keep the
// directory's totals in an extended attribute of the directory
// (user.pinfs.usage; <dir>/.usage, a symbolic link, where the file system
// has none). When a Put would take the
// directory over its budget, the Disk lists the directory and removes the
// files with the oldest modification times (Get touches the file it
// serves) down to a low-water mark of 7/8 of the budget, so that listings
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
	Evictions    int64 // blocks evicted to stay within the budget
	Writes       int64 // blocks written
	Removed      int64 // blocks dropped by Remove or found unreadable
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
		if err := d.evictLocked(t, 0, d.limit); err != nil {
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

// path returns the file name of k's block.
func (d *Disk) path(k Key) string {
	h := k.Digest.Hex()
	return filepath.Join(d.dir, h[:2], h+"-"+strconv.FormatInt(k.Index, 10))
}

// touchAge is how old a block file's modification time may be before a
// hit refreshes it: the eviction order is exact to within touchAge, and a
// block read again and again is not touched (a metadata write) on every
// read.
const touchAge = time.Minute

// Get returns the bytes of k's block, unverified, from the write queue or
// from its file, and marks the block as recently used. A block whose file
// cannot be read, or has an impossible size, is removed and reported as a
// miss. The bytes must not be modified: a queued block is shared.
func (d *Disk) Get(k Key) ([]byte, bool) {
	if !d.enabled() {
		return nil, false
	}
	if b, ok := d.queuedBlock(k); ok {
		d.hits.Add(1)
		return b, true
	}
	b, err := readBlock(d.path(k))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			d.Remove(k)
		}
		d.misses.Add(1)
		return nil, false
	}
	d.hits.Add(1)
	return b, true
}

// readBlock reads a block file of 1 to BlockSize bytes into a buffer of
// its size, with plain system calls (os.File would also try to register
// the file with the poller), and refreshes its modification time when it
// is older than touchAge.
func readBlock(p string) ([]byte, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || !isBlockSize(st.Size) {
		return nil, fmt.Errorf("%s: not a block file (mode %o, %d bytes)", p, st.Mode, st.Size)
	}
	b := make([]byte, st.Size)
	for n := 0; n < len(b); {
		k, err := unix.Read(fd, b[n:])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: p, Err: err}
		case k == 0:
			return nil, fmt.Errorf("%s: %w", p, io.ErrUnexpectedEOF)
		}
		n += k
	}
	if time.Since(time.Unix(st.Mtim.Unix())) > touchAge {
		// Best effort: only the eviction order depends on it.
		_ = unix.UtimesNanoAt(unix.AT_FDCWD, p, nil, 0)
	}
	return b, nil
}

// Put queues b as k's block for the tier's writer and returns; it does
// nothing for a block already there or larger than the whole budget. b
// must not be modified afterwards. Get and Has see a queued block at once.
// The writer evicts least recently used blocks first when the directory
// would go over its budget; a write that fails is counted and, the first
// time, logged, and leaves the tier as it was. When more than maxQueued
// bytes wait, Put waits up to queueWait for room, then drops the block
// (DiskStats.Dropped). Flush waits for the queued writes.
func (d *Disk) Put(k Key, b []byte) error {
	n := int64(len(b))
	if !d.enabled() || n > d.limit || n == 0 {
		return nil
	}
	if d.lock == nil {
		return d.writeFailed(k, errors.New("the directory cannot be written"))
	}
	if !d.enqueue(k, b) {
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

// Has reports whether k's block is in the tier, without reading it.
func (d *Disk) Has(k Key) bool {
	if !d.enabled() {
		return false
	}
	if _, ok := d.queuedBlock(k); ok {
		return true
	}
	info, err := os.Lstat(d.path(k))
	return err == nil && info.Mode().IsRegular() && info.Size() > 0 && info.Size() <= BlockSize
}

// Remove drops k's block, for example after it failed verification.
func (d *Disk) Remove(k Key) {
	if !d.enabled() || d.lock == nil {
		return
	}
	d.unqueue(k)
	p := d.path(k)
	d.locked(func(t *totals) error {
		info, err := os.Lstat(p)
		if err != nil || os.Remove(p) != nil {
			return nil
		}
		if isBlockSize(info.Size()) {
			t.bytes -= info.Size()
			t.blocks--
		}
		d.removed.Add(1)
		return nil
	})
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

// RemoveMember removes dg's whole-member file, for example after it
// failed verification, and takes its bytes off the directory's totals.
func (d *Disk) RemoveMember(dg b3.Sum) {
	if !d.enabled() || d.lock == nil {
		return
	}
	p := d.MemberPath(dg)
	d.locked(func(t *totals) error {
		info, err := os.Lstat(p)
		if err != nil || os.Remove(p) != nil {
			return nil
		}
		if info.Mode().IsRegular() {
			t.bytes -= info.Size()
			t.blocks -= (info.Size() + BlockSize - 1) / BlockSize
		}
		d.removed.Add(1)
		return nil
	})
}

func isBlockSize(n int64) bool { return n > 0 && n <= BlockSize }

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
