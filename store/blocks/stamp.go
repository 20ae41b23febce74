package blocks

// Durable stamps: a member file's verification for passthrough that
// outlives its mount (docs/mount.md, "Verification across remounts").
//
// A stamp cannot live on the member file itself: writing an extended
// attribute sets the file's ctime, so a stamp on the file could never
// name the ctime the file has once it is written. It lives on the
// file's directory (<dir>/<hex[:2]>) instead, as the trusted extended
// attribute stampPrefix + the first 16 hex digits of the digest, whose
// value names the digest, the boot and the file's stamp (device, inode,
// size, mtime, ctime). Only a process with CAP_SYS_ADMIN can write (or
// read) trusted.* attributes; verifyBacking writes one only for bytes it
// verified, or carried over a touch, under a read lease (stamplease.go).

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/verify/b3"
)

// stampPrefix begins the name of a durable stamp: the first 16 hex digits
// of the member's digest follow (the full digest is in the value).
const stampPrefix = "trusted.pinfs."

// stampVersion is the first byte of a durable stamp's value.
const stampVersion = 1

// stampLen is the length of a durable stamp's value: version, digest,
// boot id, then device, inode and size (8 bytes each) and mtime and ctime
// (seconds, 8 bytes, and nanoseconds, 4), little-endian.
const stampLen = 1 + 32 + 16 + 3*8 + 2*12

// stampFS are the file systems a durable stamp is kept on: local ones
// whose trusted.* attributes only CAP_SYS_ADMIN writes and on which every
// change of a file's bytes — write, truncate, fallocate, a write through
// a writable mapping made after the stamp — sets its ctime. On a network
// file system another host writes without the lease seeing it; on FUSE the
// attributes and times are whatever its server says.
var stampFS = map[uint32]string{
	unix.EXT4_SUPER_MAGIC:  "ext4",
	unix.XFS_SUPER_MAGIC:   "xfs",
	unix.BTRFS_SUPER_MAGIC: "btrfs",
	unix.TMPFS_MAGIC:       "tmpfs",
}

// durable is a durable stamp: the member file of digest, in the boot
// boot, had stamp st when its bytes were last known to be the member's.
type durable struct {
	digest b3.Sum
	boot   [16]byte
	st     stamp
}

func (d durable) encode() []byte {
	b := make([]byte, 0, stampLen)
	b = append(b, stampVersion)
	b = append(b, d.digest[:]...)
	b = append(b, d.boot[:]...)
	le := binary.LittleEndian
	b = le.AppendUint64(b, d.st.dev)
	b = le.AppendUint64(b, d.st.ino)
	b = le.AppendUint64(b, uint64(d.st.size))
	for _, ts := range []unix.Timespec{d.st.mtime, d.st.ctime} {
		b = le.AppendUint64(b, uint64(ts.Sec))
		b = le.AppendUint32(b, uint32(ts.Nsec))
	}
	return b
}

// decodeDurable decodes a durable stamp's value; ok is false for a value
// of another version or length.
func decodeDurable(b []byte) (d durable, ok bool) {
	if len(b) != stampLen || b[0] != stampVersion {
		return d, false
	}
	le := binary.LittleEndian
	b = b[1:]
	copy(d.digest[:], b)
	copy(d.boot[:], b[32:])
	b = b[48:]
	d.st.dev, d.st.ino, d.st.size = le.Uint64(b), le.Uint64(b[8:]), int64(le.Uint64(b[16:]))
	b = b[24:]
	d.st.mtime = unix.Timespec{Sec: int64(le.Uint64(b)), Nsec: int64(le.Uint32(b[8:]))}
	d.st.ctime = unix.Timespec{Sec: int64(le.Uint64(b[12:])), Nsec: int64(le.Uint32(b[20:]))}
	return d, true
}

// stampName returns the name of the durable stamp of the member of digest
// dg.
func stampName(dg b3.Sum) string { return stampPrefix + dg.Hex()[:16] }

// bootID returns this boot's id (/proc/sys/kernel/random/boot_id): a
// durable stamp is trusted only in the boot that wrote it, as a crash may
// leave a file's new bytes on disk without its new ctime.
var bootID = sync.OnceValues(func() ([16]byte, error) {
	var id [16]byte
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return id, err
	}
	h := strings.ReplaceAll(strings.TrimSpace(string(b)), "-", "")
	if len(h) != 32 {
		return id, fmt.Errorf("boot_id %q", b)
	}
	_, err = hex.Decode(id[:], []byte(h))
	return id, err
})

// stampDir opens the directory of m's member file, which holds its
// durable stamp, if it is on the member file's file system (of stamp st)
// and that is one of stampFS.
func (r *Reader) stampDir(m *Member, st stamp) (int, error) {
	dir := filepath.Dir(r.disk.MemberPath(m.Digest))
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	var dst unix.Stat_t
	var sfs unix.Statfs_t
	switch {
	case unix.Fstat(fd, &dst) != nil || dst.Dev != st.dev:
		err = errors.New("the member file's directory is on another file system")
	case unix.Fstatfs(fd, &sfs) != nil:
		err = errors.New("statfs of the member file's directory failed")
	case stampFS[uint32(sfs.Type)] == "":
		err = fmt.Errorf("file system type %#x keeps no stamps", uint32(sfs.Type))
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// stampAt opens the directory that keeps the durable stamp of m's file of
// stamp st (stampDir) and returns it with this boot's id; ok is false
// when there is none to use.
func (r *Reader) stampAt(m *Member, st stamp) (fd int, boot [16]byte, ok bool) {
	boot, err := bootID()
	if err != nil {
		return -1, boot, false
	}
	fd, err = r.stampDir(m, st)
	return fd, boot, err == nil
}

// stampedDurably reports whether m's durable stamp says that a member
// file of stamp st holds m's bytes.
func (r *Reader) stampedDurably(m *Member, st stamp) bool {
	fd, boot, ok := r.stampAt(m, st)
	if !ok {
		return false
	}
	defer unix.Close(fd)
	var buf [stampLen + 1]byte
	n, err := unix.Fgetxattr(fd, stampName(m.Digest), buf[:])
	if err != nil {
		return false
	}
	d, ok := decodeDurable(buf[:n])
	return ok && d.digest == m.Digest && d.boot == boot && d.st == st
}

// stampDurably records st as m's durable stamp, if the file system keeps
// stamps; when the directory has no room left for it, it first prunes
// the directory's stamps (pruneStamps). It reports whether the stamp was
// written.
func (r *Reader) stampDurably(m *Member, st stamp) bool {
	fd, boot, ok := r.stampAt(m, st)
	if !ok {
		return false
	}
	defer unix.Close(fd)
	name, v := stampName(m.Digest), durable{digest: m.Digest, boot: boot, st: st}.encode()
	err := unix.Fsetxattr(fd, name, v, 0)
	if (err == unix.ENOSPC || err == unix.E2BIG) && pruneStamps(fd, filepath.Dir(r.disk.MemberPath(m.Digest)), boot) {
		err = unix.Fsetxattr(fd, name, v, 0)
	}
	return err == nil
}

// unstamp removes m's durable stamp, if it has one.
func (r *Reader) unstamp(m *Member) {
	fd, err := unix.Open(filepath.Dir(r.disk.MemberPath(m.Digest)), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	unix.Fremovexattr(fd, stampName(m.Digest))
	unix.Close(fd)
}

// pruneStamps makes room among the durable stamps of the directory fd
// (dir), whose extended attributes share one block on ext4 (about 29
// stamps): it removes the stamps of another boot and those that no longer
// match their member file (evicted, replaced, changed), or if there are
// none, the stamp of the oldest ctime. It reports whether it removed one.
func pruneStamps(fd int, dir string, boot [16]byte) bool {
	n, err := unix.Flistxattr(fd, nil)
	if err != nil || n <= 0 {
		return false
	}
	list := make([]byte, n)
	if n, err = unix.Flistxattr(fd, list); err != nil {
		return false
	}
	var (
		oldest  string
		oldestC unix.Timespec
		removed bool
		buf     [stampLen + 1]byte
	)
	for _, name := range strings.Split(string(list[:n]), "\x00") {
		if !strings.HasPrefix(name, stampPrefix) {
			continue
		}
		k, err := unix.Fgetxattr(fd, name, buf[:])
		if err != nil {
			continue
		}
		d, ok := decodeDurable(buf[:k])
		var st unix.Stat_t
		if !ok || d.boot != boot || unix.Lstat(filepath.Join(dir, d.digest.Hex()), &st) != nil || stampOf(&st) != d.st {
			removed = unix.Fremovexattr(fd, name) == nil || removed
			continue
		}
		if oldest == "" || d.st.ctime.Nano() < oldestC.Nano() {
			oldest, oldestC = name, d.st.ctime
		}
	}
	if !removed && oldest != "" {
		removed = unix.Fremovexattr(fd, oldest) == nil
	}
	return removed
}
