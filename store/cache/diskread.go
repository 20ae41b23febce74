package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// touchAge is how old a partial file's modification time may be before a
// hit refreshes it: the eviction order is exact to within touchAge, and a
// member read again and again is not touched (a metadata write) on every
// read.
const touchAge = time.Minute

// WholeTouchAge is how old a whole-member file's modification time may be
// before a hit, or the open path's hand-over (store/blocks Backing),
// refreshes it. A whole-member file is also read through Get
// alone (a mount without passthrough, a cached open), and it must still be
// seen as used, or eviction would go by the order members were completed.
// Its times are part of the stamp the open path verified (store/blocks
// Backing), so a touch costs a passthrough mount one verification of the
// file: an hour, the open path's own touch age, keeps that to what the
// open path spends anyway.
const WholeTouchAge = time.Hour

// Get returns the bytes of k's block, unverified, of a member of size
// bytes: from the write queue, else from the member's whole-member file,
// else from its partial file if the block is there. A hit marks the
// member as recently used: a partial file older than touchAge, a
// whole-member file older than WholeTouchAge (its times are part of what
// the open path verified). A member file that cannot be read, or is not
// what its name says, is removed and reported as a miss. The bytes must
// not be modified: a queued block is shared.
func (d *Disk) Get(k Key, size int64) ([]byte, bool) {
	if !d.enabled() || blockLen(size, k.Index) == 0 {
		return nil, false
	}
	if b, ok := d.queuedBlock(k); ok {
		d.hits.Add(1)
		return b, true
	}
	b, err := d.readBlock(k, size, nil)
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

// readBlock reads k's block from the member's files. A partial file that
// cannot be read may have just been completed and renamed by another
// writer, so the whole-member file is looked for once more before the
// error is believed.
func (d *Disk) readBlock(k Key, size int64, dst []byte) ([]byte, error) {
	whole := d.MemberPath(k.Digest)
	b, err := readWhole(whole, k.Index, size, dst)
	if !errors.Is(err, fs.ErrNotExist) || size <= BlockSize {
		return b, err
	}
	b, err = readPart(d.partPath(k.Digest), k.Index, size, dst)
	if err == nil || errors.Is(err, errAbsent) {
		return b, err
	}
	if b, werr := readWhole(whole, k.Index, size, dst); werr == nil {
		return b, nil
	}
	return nil, err
}

// blockBuf returns dst, which must be n bytes long, or n new bytes if dst
// is nil.
func blockBuf(dst []byte, n int64) []byte {
	if dst == nil {
		return make([]byte, n)
	}
	return dst[:n]
}

// ReadInto is Get into dst, which must be the block's length: it reads
// k's block into dst and reports whether it did. dst's bytes are
// undefined when it did not.
func (d *Disk) ReadInto(k Key, size int64, dst []byte) bool {
	n := blockLen(size, k.Index)
	if !d.enabled() || n == 0 || int64(len(dst)) != n {
		return false
	}
	if d.copyQueued(k, dst) {
		d.hits.Add(1)
		return true
	}
	if _, err := d.readBlock(k, size, dst); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			d.Remove(k)
		}
		d.misses.Add(1)
		return false
	}
	d.hits.Add(1)
	return true
}

// errAbsent is a partial file without the block asked for: a miss, not
// damage.
var errAbsent = fmt.Errorf("block not in the partial file: %w", fs.ErrNotExist)

// readWhole reads block i from the whole-member file p of a member of
// size bytes, and refreshes the file's modification time when it is older
// than WholeTouchAge.
func readWhole(p string, i, size int64, dst []byte) ([]byte, error) {
	fd, st, err := openMember(p, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if st.Size != size {
		return nil, fmt.Errorf("%s: %d bytes, the member has %d: %w", p, st.Size, size, errDamaged)
	}
	b := blockBuf(dst, blockLen(size, i))
	if err := preadFull(fd, b, i*BlockSize); err != nil {
		return nil, err
	}
	if time.Since(time.Unix(st.Mtim.Unix())) > WholeTouchAge {
		// Best effort, as for a partial file.
		_ = unix.UtimesNanoAt(unix.AT_FDCWD, p, nil, unix.AT_SYMLINK_NOFOLLOW)
	}
	return b, nil
}

// readPart reads block i from the partial file p of a member of size
// bytes, and refreshes the file's modification time when it is older than
// touchAge.
func readPart(p string, i, size int64, dst []byte) ([]byte, error) {
	fd, st, err := openMember(p, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if st.Size != partLen(size) {
		return nil, fmt.Errorf("%s: %d bytes, want %d: %w", p, st.Size, partLen(size), errDamaged)
	}
	ok, err := hasBit(fd, size, i)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errAbsent
	}
	b := blockBuf(dst, blockLen(size, i))
	if err := preadFull(fd, b, i*BlockSize); err != nil {
		return nil, err
	}
	if time.Since(time.Unix(st.Mtim.Unix())) > touchAge {
		// Best effort: only the eviction order depends on it.
		_ = unix.UtimesNanoAt(unix.AT_FDCWD, p, nil, unix.AT_SYMLINK_NOFOLLOW)
	}
	return b, nil
}

// openMember opens the member file p with flags and O_NOFOLLOW, with plain
// system calls (os.File would also try to register the file with the
// poller), and checks that it is a regular file. A missing file is an
// fs.ErrNotExist.
func openMember(p string, flags int) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Open(p, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, st, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, st, fmt.Errorf("%s: mode %o: %w", p, st.Mode, errDamaged)
	}
	return fd, st, nil
}

// Has reports whether k's block, of a member of size bytes, is in the
// tier, without reading it.
func (d *Disk) Has(k Key, size int64) bool {
	if !d.enabled() || blockLen(size, k.Index) == 0 {
		return false
	}
	if _, ok := d.queuedBlock(k); ok {
		return true
	}
	if info, err := os.Lstat(d.MemberPath(k.Digest)); err == nil {
		return info.Mode().IsRegular() && info.Size() == size
	}
	if size <= BlockSize {
		return false
	}
	fd, st, err := openMember(d.partPath(k.Digest), unix.O_RDONLY)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	ok, err := hasBit(fd, size, k.Index)
	return err == nil && ok && st.Size == partLen(size)
}
