package cache

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/verify/b3"
)

// Remove drops k's block, for example after it failed verification. In a
// partial file it clears the block's bit (and removes the file once no
// block is left); a whole-member file cannot lose one block, so it is
// removed whole.
func (d *Disk) Remove(k Key) {
	if !d.enabled() || d.lock == nil {
		return
	}
	d.unqueue(k)
	d.locked(func(t *totals) error {
		if d.removeWholeLocked(t, k.Digest) {
			return nil
		}
		d.removeFromPartLocked(t, k)
		return nil
	})
}

// RemoveMember removes dg's member files, whole or partial, and its queued
// blocks, for example after the whole-member file failed verification, and
// takes the bytes they held off the directory's totals.
func (d *Disk) RemoveMember(dg b3.Sum) {
	if !d.enabled() || d.lock == nil {
		return
	}
	d.unqueueMember(dg)
	d.locked(func(t *totals) error {
		d.removeWholeLocked(t, dg)
		p := d.partPath(dg)
		fd, st, err := openMember(p, unix.O_RDONLY)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) && os.Remove(p) == nil {
				d.removed.Add(1) // not a regular file: never counted
			}
			return nil
		}
		tr, err := readTrailer(fd, st.Size)
		unix.Close(fd)
		if os.Remove(p) != nil {
			return nil
		}
		d.removed.Add(1)
		if err != nil {
			t.ok = false // damaged: what it was counted as is unknown; the next writer lists
			return nil
		}
		n, blocks := tr.held()
		t.bytes -= n
		t.blocks -= blocks
		return nil
	})
}

// removeWholeLocked removes dg's whole-member file, if there is one, and
// reports whether there was. The caller holds the lock.
func (d *Disk) removeWholeLocked(t *totals, dg b3.Sum) bool {
	p := d.MemberPath(dg)
	info, err := os.Lstat(p)
	if err != nil {
		return false
	}
	if os.Remove(p) != nil {
		return true
	}
	if info.Mode().IsRegular() {
		t.bytes -= info.Size()
		t.blocks -= numBlocks(info.Size())
	}
	d.removed.Add(1)
	return true
}

// removeFromPartLocked clears k's bit in its member's partial file. A
// damaged partial file is removed. The caller holds the lock.
func (d *Disk) removeFromPartLocked(t *totals, k Key) {
	p := d.partPath(k.Digest)
	fd, st, err := openMember(p, unix.O_RDWR)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			os.Remove(p) // not a regular file: never counted
		}
		return
	}
	defer unix.Close(fd)
	tr, err := readTrailer(fd, st.Size)
	if err != nil {
		os.Remove(p)
		t.ok = false
		return
	}
	if k.Index >= numBlocks(tr.size) || !tr.has(k.Index) {
		return
	}
	tr.clear(k.Index)
	d.removed.Add(1)
	t.bytes -= blockLen(tr.size, k.Index)
	t.blocks--
	if _, left := tr.held(); left == 0 {
		os.Remove(p)
		return
	}
	if err := pwriteAll(fd, tr.encode(), trailerOff(tr.size)); err != nil {
		os.Remove(p) // the bit could not be cleared: the file goes
		t.ok = false
	}
}
