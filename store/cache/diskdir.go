package cache

// The directory's shared accounting: its lock, its totals, and the listing
// that evicts and corrects them (see the Disk doc, "Shared accounting").

import (
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
// member files, whole or partial, until at most target bytes are left;
// keep, the partial file about to be written, is never removed (the
// caller keeps only a member that fits the budget). The caller holds the
// lock.
func (d *Disk) evictLocked(t *totals, n, target int64, keep string) error {
	all, err := d.list()
	if err != nil {
		return err
	}
	var total, blocks int64
	for _, f := range all {
		total += f.bytes
		blocks += f.blocks
	}
	*t = totals{bytes: total, blocks: blocks, ok: true}
	if total+n <= d.limit {
		return nil
	}
	slices.SortFunc(all, func(a, b found) int { return a.mtime.Compare(b.mtime) })
	for _, f := range all {
		if t.bytes <= target {
			break
		}
		if f.path == keep {
			continue
		}
		if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			continue // cannot be removed (a read-only directory): still counted
		}
		t.bytes -= f.bytes
		t.blocks -= f.blocks
		d.evictions.Add(f.blocks)
	}
	return nil
}

// found is a member file seen by list, and the bytes and blocks it holds.
type found struct {
	path          string
	bytes, blocks int64
	mtime         time.Time
}

// staleTemp is the age after which a listing removes a temporary file.
const staleTemp = 10 * time.Minute

// list returns the directory's member files. Files that are not member
// files are left alone and not listed; temporary files abandoned long ago,
// files of the earlier one-file-per-block layout, and member files that
// hold nothing or are damaged are removed. The caller holds the lock, so
// no partial file is half written.
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
			if name[:min(2, len(name))] != sub.Name() {
				continue
			}
			if isOldName(name) {
				os.Remove(p) // the earlier layout: a cache, fetched again
				continue
			}
			h, isPart := strings.CutSuffix(name, partSuffix)
			if !isHex(h, 64) || !f.Type().IsRegular() {
				continue
			}
			info, err := f.Info()
			if err != nil {
				continue // removed meanwhile
			}
			m := found{path: p, bytes: info.Size(), blocks: numBlocks(info.Size()), mtime: info.ModTime()}
			if isPart {
				m.bytes, m.blocks, err = partHeld(p)
			}
			if err != nil || m.bytes <= 0 {
				os.Remove(p)
				continue
			}
			all = append(all, m)
		}
	}
	return all, nil
}

// partHeld returns the bytes and blocks the partial file p holds.
func partHeld(p string) (n, blocks int64, err error) {
	fd, st, err := openMember(p, unix.O_RDONLY)
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(fd)
	tr, err := readTrailer(fd, st.Size)
	if err != nil {
		return 0, 0, err
	}
	n, blocks = tr.held()
	return n, blocks, nil
}

// isOldName reports whether name is a block file name of the earlier
// layout, "<64 hex>-<index>".
func isOldName(name string) bool {
	h, idx, ok := strings.Cut(name, "-")
	if !ok || !isHex(h, 64) {
		return false
	}
	i, err := strconv.ParseInt(idx, 10, 64)
	return err == nil && i >= 0 && strconv.FormatInt(i, 10) == idx
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
