package cache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// How the writer puts the blocks of a member of more than one block in
// place: all under the directory's lock, because several processes may
// write the same member, and the bitmap's read-modify-write and the final
// rename must not interleave. The partial file is opened, written and
// closed within one hold of the lock, so no process ever writes to a file
// it has not just checked under the lock. The data is written before the
// bits: a reader that sees a bit set (without the lock) finds the block's
// bytes in the file.

// writePartLocked writes the blocks ps, all of one member and still
// queued, into the member's partial file, evicting other members first if
// the directory would go over its budget, and completes the file into the
// whole-member file when its last block is there. It returns the blocks
// it could not write with the error. The caller holds the lock.
func (d *Disk) writePartLocked(t *totals, ps []*pending) ([]*pending, error) {
	dg, size := ps[0].k.Digest, ps[0].size
	whole, part := d.MemberPath(dg), d.partPath(dg)
	if d.wholeLocked(t, whole, size) {
		return nil, nil // whole already (another process): not touched, see Get
	}
	var need int64
	live := ps[:0:0]
	for _, p := range ps {
		if d.stillQueued(p) {
			live = append(live, p)
			need += int64(len(p.b))
		}
	}
	if len(live) == 0 {
		return nil, nil
	}
	// need may count blocks another process wrote meanwhile: an eviction a
	// little early, never a budget overrun. The member's own partial file
	// is kept when the member fits the budget: evicting it to write into
	// it would only lose its other blocks.
	keep := part
	if size > d.limit {
		keep = ""
	}
	if !t.ok || t.bytes+need > d.limit {
		if err := d.evictLocked(t, need, d.lowWater()-need, keep); err != nil {
			return live, err
		}
	}
	fd, err := openMkdir(filepath.Dir(part), func() (int, error) {
		return unix.Open(part, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	})
	if err != nil {
		return live, fmt.Errorf("open %s: %w", part, err)
	}
	// empty: the file records no block (new, or its trailer unreadable).
	// Such a file is removed rather than left for a listing (a full disk
	// would otherwise keep one per member it refused).
	empty := true
	defer func() {
		if empty {
			os.Remove(part)
		}
		if fd >= 0 {
			unix.Close(fd)
		}
	}()
	tr, err := d.partTrailerLocked(t, fd, size)
	if err != nil {
		return live, err
	}
	_, held := tr.held()
	empty = held == 0
	var added, addedBlocks int64
	var failed []*pending
	for _, p := range live {
		i := p.k.Index
		if tr.has(i) {
			continue
		}
		if err = pwriteAll(fd, p.b, i*BlockSize); err != nil {
			failed = append(failed, p)
			continue
		}
		tr.set(i)
		added += int64(len(p.b))
		addedBlocks++
	}
	if addedBlocks == 0 {
		return failed, err
	}
	if werr := pwriteAll(fd, tr.encode(), trailerOff(size)); werr != nil {
		// The bits are not recorded: the blocks written are not there.
		return live, werr
	}
	empty = false
	t.bytes += added
	t.blocks += addedBlocks
	d.writes.Add(addedBlocks)
	if tr.full() {
		if cerr := complete(fd, part, whole, size); cerr != nil {
			t.ok = false // a partial file cut short is no partial file: the next listing removes it
			return failed, cerr
		}
	}
	return failed, err
}

// wholeLocked reports whether the whole-member file whole of a member of
// size bytes is there. One that is not what its name says (another size,
// not a regular file) is removed, so that it does not stand in the way of
// the good copy the caller is writing. The caller holds the lock.
func (d *Disk) wholeLocked(t *totals, whole string, size int64) bool {
	info, err := os.Lstat(whole)
	switch {
	case err != nil:
		return false
	case info.Mode().IsRegular() && info.Size() == size:
		return true
	}
	if os.Remove(whole) == nil && info.Mode().IsRegular() {
		t.bytes -= info.Size()
		t.blocks -= numBlocks(info.Size())
		d.removed.Add(1)
	}
	return false
}

// partTrailerLocked reads the trailer of the partial file fd of a member
// of size bytes, making the file's trailer if it is new. A file that is
// not a partial file of that member (a crash, a hand edit) is started
// over, and the totals marked unknown, for the next writer to list. The
// caller holds the lock.
func (d *Disk) partTrailerLocked(t *totals, fd int, size int64) (trailer, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return trailer{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return trailer{}, errDamaged
	}
	if st.Size > 0 {
		tr, err := readTrailer(fd, st.Size)
		if err == nil && tr.size == size {
			return tr, nil
		}
		if !errors.Is(err, errDamaged) && err != nil {
			return trailer{}, err
		}
		t.ok = false
		if err := unix.Ftruncate(fd, 0); err != nil {
			return trailer{}, err
		}
	}
	tr := newTrailer(size)
	if err := unix.Ftruncate(fd, partLen(size)); err != nil {
		return trailer{}, err
	}
	if err := pwriteAll(fd, tr.encode(), trailerOff(size)); err != nil {
		return trailer{}, err
	}
	return tr, nil
}

// complete turns the full partial file fd, at part, into the whole-member
// file whole: the trailer is cut off, the mode made 0400 (what the open
// path requires), and the name changed last, so that the whole-member name
// only ever names a whole file.
func complete(fd int, part, whole string, size int64) error {
	if err := unix.Ftruncate(fd, size); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, 0o400); err != nil {
		return err
	}
	return os.Rename(part, whole)
}
