package cache

import (
	"container/list"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// tmpPrefix starts the name of a block file that is still being written.
// Such a file is never read, and Open removes any left over by a crash.
const tmpPrefix = ".tmp-"

// Disk is the disk tier: one file per block under a directory, at
// <dir>/<hex[:2]>/<hex>-<index>, bounded by the sum of the files' sizes and
// evicting the least recently used block first. It is safe for concurrent
// use, also by several Readers; two Disks must not share a directory.
//
// Get does not verify: the bytes are whatever the file holds, and the
// caller verifies them and calls Remove for a block that fails. Put writes
// a temporary file in the block's directory and renames it, so no partial
// block is ever visible under a block's name. Data is not fsynced: after a
// crash a block may be empty or torn, which verification catches.
//
// The recency order is kept in memory. Open seeds it from the files'
// modification times, and Get touches the file it serves, so that the order
// roughly survives a restart.
type Disk struct {
	dir   string
	limit int64

	// mu guards lru, index and bytes, and is held while a block file is
	// renamed into place or removed, so that index and directory agree.
	mu    sync.Mutex
	lru   *list.List // of *diskEntry, most recently used first
	index map[Key]*list.Element
	bytes int64

	hits, misses, evictions, writes, removed atomic.Int64
}

type diskEntry struct {
	key  Key
	size int64
}

// DiskStats counts the disk tier's activity.
type DiskStats struct {
	Hits, Misses int64
	Bytes        int64 // bytes held now
	Blocks       int64 // blocks held now
	Evictions    int64 // blocks evicted to stay within the budget
	Writes       int64 // blocks written
	Removed      int64 // blocks dropped by Remove or found unreadable
}

// OpenDisk opens the disk tier in dir with a budget of limit bytes, creating
// dir if needed. It scans dir to rebuild the size accounting and the recency
// order, removes temporary files left by an earlier process, and evicts down
// to limit. A limit <= 0 disables the tier: dir is not touched, Get always
// misses and Put does nothing.
func OpenDisk(dir string, limit int64) (*Disk, error) {
	d := &Disk{dir: dir, limit: limit, lru: list.New(), index: make(map[Key]*list.Element)}
	if limit <= 0 {
		return d, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	if err := d.scan(); err != nil {
		return nil, fmt.Errorf("cache: scanning %s: %w", dir, err)
	}
	return d, nil
}

// Dir returns the tier's directory.
func (d *Disk) Dir() string { return d.dir }

func (d *Disk) enabled() bool { return d != nil && d.limit > 0 }

// path returns the file name of k's block.
func (d *Disk) path(k Key) string {
	h := k.Digest.Hex()
	return filepath.Join(d.dir, h[:2], h+"-"+strconv.FormatInt(k.Index, 10))
}

// Get returns the bytes of k's block file, unverified, and marks the block
// as recently used. A block whose file has gone or cannot be read is
// forgotten and reported as a miss.
func (d *Disk) Get(k Key) ([]byte, bool) {
	if !d.enabled() {
		return nil, false
	}
	d.mu.Lock()
	e, ok := d.index[k]
	if ok {
		d.lru.MoveToFront(e)
	}
	d.mu.Unlock()
	if !ok {
		d.misses.Add(1)
		return nil, false
	}
	p := d.path(k)
	b, err := os.ReadFile(p)
	if err != nil {
		d.Remove(k)
		d.misses.Add(1)
		return nil, false
	}
	now := time.Now()
	_ = os.Chtimes(p, now, now) // best effort: only the order after a restart depends on it
	d.hits.Add(1)
	return b, true
}

// Put stores b as k's block unless it is already there or is larger than
// the whole budget, then evicts least recently used blocks until the tier
// is within its budget again.
func (d *Disk) Put(k Key, b []byte) error {
	if !d.enabled() || int64(len(b)) > d.limit {
		return nil
	}
	if d.touch(k) {
		return nil
	}
	final := d.path(k)
	sub := filepath.Dir(final)
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	f, err := os.CreateTemp(sub, tmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(b)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("cache: writing block %v: %w", k, werr)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.index[k]; ok { // another Put won the race
		d.lru.MoveToFront(e)
		os.Remove(tmp)
		return nil
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cache: %w", err)
	}
	d.index[k] = d.lru.PushFront(&diskEntry{key: k, size: int64(len(b))})
	d.bytes += int64(len(b))
	d.writes.Add(1)
	d.evictLocked()
	return nil
}

// touch marks k as recently used and reports whether it is held.
func (d *Disk) touch(k Key) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.index[k]
	if ok {
		d.lru.MoveToFront(e)
	}
	return ok
}

// Has reports whether k's block is in the tier, without reading it.
func (d *Disk) Has(k Key) bool {
	if !d.enabled() {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.index[k]
	return ok
}

// Remove drops k's block, for example after it failed verification.
func (d *Disk) Remove(k Key) {
	if !d.enabled() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.index[k]; ok {
		d.dropLocked(e)
		d.removed.Add(1)
	}
}

// evictLocked drops least recently used blocks until the tier fits its
// budget. d.mu must be held.
func (d *Disk) evictLocked() {
	for d.bytes > d.limit {
		e := d.lru.Back()
		if e == nil {
			return
		}
		d.dropLocked(e)
		d.evictions.Add(1)
	}
}

// dropLocked removes e's file and forgets e. d.mu must be held.
func (d *Disk) dropLocked(e *list.Element) {
	de := e.Value.(*diskEntry)
	// A file that cannot be removed stays behind unaccounted until the
	// next Open; the index forgets it all the same.
	os.Remove(d.path(de.key))
	d.lru.Remove(e)
	delete(d.index, de.key)
	d.bytes -= de.size
}

// staleTemp is the age after which scan removes a temporary file.
const staleTemp = 10 * time.Minute

// scan rebuilds the index from the directory. Files that are not block
// files are left alone and not counted; temporary files and block files of
// impossible sizes are removed.
func (d *Disk) scan() error {
	type found struct {
		key   Key
		size  int64
		mtime time.Time
	}
	var all []found
	subs, err := os.ReadDir(d.dir)
	if err != nil {
		return err
	}
	for _, sub := range subs {
		if !sub.IsDir() || !isHex(sub.Name(), 2) {
			continue
		}
		subdir := filepath.Join(d.dir, sub.Name())
		files, err := os.ReadDir(subdir)
		if err != nil {
			return err
		}
		for _, f := range files {
			name := f.Name()
			p := filepath.Join(subdir, name)
			if strings.HasPrefix(name, tmpPrefix) {
				// Another process sharing the directory may be writing it
				// right now; only a temp file abandoned long ago is removed.
				if info, err := f.Info(); err == nil && time.Since(info.ModTime()) > staleTemp {
					os.Remove(p)
				}
				continue
			}
			k, ok := parseName(name)
			if !ok || name[:2] != sub.Name() || !f.Type().IsRegular() {
				continue
			}
			info, err := f.Info()
			if err != nil {
				continue // removed meanwhile
			}
			if info.Size() <= 0 || info.Size() > BlockSize {
				os.Remove(p)
				continue
			}
			all = append(all, found{k, info.Size(), info.ModTime()})
		}
	}
	slices.SortFunc(all, func(a, b found) int { return a.mtime.Compare(b.mtime) })
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range all {
		d.index[f.key] = d.lru.PushFront(&diskEntry{key: f.key, size: f.size})
		d.bytes += f.size
	}
	d.evictLocked()
	return nil
}

// parseName parses a block file name, "<64 hex>-<index>".
func parseName(name string) (Key, bool) {
	var k Key
	h, idx, ok := strings.Cut(name, "-")
	if !ok || !isHex(h, 64) {
		return k, false
	}
	i, err := strconv.ParseInt(idx, 10, 64)
	if err != nil || i < 0 || strconv.FormatInt(i, 10) != idx {
		return k, false
	}
	hex.Decode(k.Digest[:], []byte(h))
	k.Index = i
	return k, true
}

// isHex reports whether s is n lower-case hex digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Stats returns the tier's counters.
func (d *Disk) Stats() DiskStats {
	if d == nil {
		return DiskStats{}
	}
	d.mu.Lock()
	bytes, blocks := d.bytes, int64(len(d.index))
	d.mu.Unlock()
	return DiskStats{
		Hits: d.hits.Load(), Misses: d.misses.Load(),
		Bytes: bytes, Blocks: blocks,
		Evictions: d.evictions.Load(), Writes: d.writes.Load(), Removed: d.removed.Load(),
	}
}
