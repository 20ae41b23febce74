package cache

// The directory's shared accounting: its lock, its totals, and the listing
// that evicts and corrects them (see the Disk doc, "Shared accounting").

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// totals are the directory's block bytes and count; ok is false when
// they are missing or unreadable, and the directory must be listed.
type totals struct {
	bytes, blocks int64
	ok            bool
}

// locked runs f holding the directory's lock, with the directory's totals,
// and writes back the totals f leaves (unless f fails).
func (d *Disk) locked(f func(*totals) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	fd := int(d.lock.Fd())
	if err := flock(fd, unix.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", d.dir, err)
	}
	defer flock(fd, unix.LOCK_UN)
	t := d.readUsage()
	before := t
	err := f(&t)
	if t.bytes < 0 || t.blocks < 0 {
		t = totals{} // drifted: the next writer lists the directory
	}
	if t != before {
		d.writeUsage(t)
	}
	if t.ok {
		d.bytes.Store(t.bytes)
		d.blocks.Store(t.blocks)
	}
	return err
}

// flock calls flock(2), again when a signal interrupts it.
func flock(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if err != unix.EINTR {
			return err
		}
	}
}

// readUsage reads the directory's totals. The caller holds the lock.
func (d *Disk) readUsage() totals {
	var buf [64]byte
	var s string
	n, err := getxattr(int(d.lock.Fd()), usageAttr, buf[:])
	switch {
	case err == nil:
		s = string(buf[:n])
	case errors.Is(err, unix.ENOTSUP):
		if s, err = os.Readlink(filepath.Join(d.dir, usageName)); err != nil {
			return totals{}
		}
	default:
		return totals{}
	}
	a, b, ok := strings.Cut(s, " ")
	bytes, err1 := strconv.ParseInt(a, 10, 64)
	blocks, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || bytes < 0 || blocks < 0 {
		return totals{}
	}
	return totals{bytes: bytes, blocks: blocks, ok: true}
}

// writeUsage stores t as the directory's totals ("unknown" when t is not
// ok). The caller holds the lock.
func (d *Disk) writeUsage(t totals) error {
	target := "unknown"
	if t.ok {
		target = strconv.FormatInt(t.bytes, 10) + " " + strconv.FormatInt(t.blocks, 10)
	}
	err := setxattr(int(d.lock.Fd()), usageAttr, []byte(target), 0)
	if !errors.Is(err, unix.ENOTSUP) {
		return err
	}
	// No user extended attributes here: a symbolic link, replaced
	// atomically (slower: two more directory entries changed per write).
	tmp := filepath.Join(d.dir, tmpPrefix+usageName)
	os.Remove(tmp) // left by a crash
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(d.dir, usageName)); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// getxattr and setxattr are unix.Fgetxattr and unix.Fsetxattr; a test
// replaces them to take the path of a file system without them.
var (
	getxattr = unix.Fgetxattr
	setxattr = unix.Fsetxattr
)

// lowWater is what an eviction leaves in the directory, at most: 7/8 of
// the budget, so that the next few Puts need no listing.
func (d *Disk) lowWater() int64 { return d.limit - d.limit/8 }

// evictLocked lists the directory and sets t to what it holds. If that
// plus n more bytes is over the budget, it removes the least recently used
// blocks until at most target bytes are left. The caller holds the lock.
func (d *Disk) evictLocked(t *totals, n, target int64) error {
	all, err := d.list()
	if err != nil {
		return err
	}
	var total int64
	for _, f := range all {
		total += f.size
	}
	*t = totals{bytes: total, blocks: int64(len(all)), ok: true}
	if total+n <= d.limit {
		return nil
	}
	slices.SortFunc(all, func(a, b found) int { return a.mtime.Compare(b.mtime) })
	for _, f := range all {
		if t.bytes <= target {
			break
		}
		if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			continue // cannot be removed (a read-only directory): still counted
		}
		t.bytes -= f.size
		t.blocks--
		d.evictions.Add(1)
	}
	return nil
}

// found is a block file seen by list.
type found struct {
	path  string
	size  int64
	mtime time.Time
}

// staleTemp is the age after which a listing removes a temporary file.
const staleTemp = 10 * time.Minute

// list returns the directory's block files. Files that are not block
// files are left alone and not listed; temporary files abandoned long ago
// and block files of impossible sizes are removed.
func (d *Disk) list() ([]found, error) {
	var all []found
	subs, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, err
	}
	for _, sub := range subs {
		if !sub.IsDir() || !isHex(sub.Name(), 2) {
			continue
		}
		subdir := filepath.Join(d.dir, sub.Name())
		files, err := os.ReadDir(subdir)
		if err != nil {
			return nil, err
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
			_, ok := parseName(name)
			if !ok || name[:2] != sub.Name() || !f.Type().IsRegular() {
				continue
			}
			info, err := f.Info()
			if err != nil {
				continue // removed meanwhile
			}
			if !isBlockSize(info.Size()) {
				os.Remove(p)
				continue
			}
			all = append(all, found{p, info.Size(), info.ModTime()})
		}
	}
	return all, nil
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
