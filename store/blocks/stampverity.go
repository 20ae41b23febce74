package blocks

// fs-verity: where the file system has it, a verified member file is made
// a verity file, whose bytes the kernel checks on every read from disk
// against a Merkle tree whose root (the measurement) is fixed; such a
// file can never be written again. Its stamp then needs no times and no
// boot: the trusted attribute verityAttr on the file itself binds the
// member's digest to the measurement. Not tried here: this machine's
// kernel has no fs-verity, so every call below fails and the ctime stamp
// (stamp.go) is used.

import (
	"bytes"
	"encoding/binary"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// verityAttr names a verity file's stamp: version, the member's digest,
// the hash algorithm (2 bytes, little-endian) and the measurement.
const verityAttr = "trusted.pinfs.verity"

// maxVerityDigest is the longest measurement (SHA-512).
const maxVerityDigest = 64

// measureVerity returns the hash algorithm and measurement of the verity
// file fd, or ok false when it is not one (or the kernel has no fs-verity).
func measureVerity(fd uintptr) (alg uint16, digest []byte, ok bool) {
	var stx unix.Statx_t
	if unix.Statx(int(fd), "", unix.AT_EMPTY_PATH, 0, &stx) != nil ||
		stx.Attributes_mask&unix.STATX_ATTR_VERITY == 0 || stx.Attributes&unix.STATX_ATTR_VERITY == 0 {
		return 0, nil, false
	}
	// struct fsverity_digest: u16 digest_algorithm, u16 digest_size (in:
	// the room; out: the length), then the digest.
	buf := make([]byte, 4+maxVerityDigest)
	binary.NativeEndian.PutUint16(buf[2:], maxVerityDigest)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, unix.FS_IOC_MEASURE_VERITY, uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
		return 0, nil, false
	}
	n := int(binary.NativeEndian.Uint16(buf[2:]))
	if n == 0 || n > maxVerityDigest {
		return 0, nil, false
	}
	return binary.NativeEndian.Uint16(buf), buf[4 : 4+n], true
}

// verityValue returns the value of verityAttr for m's member file of
// measurement digest with algorithm alg.
func verityValue(m *Member, alg uint16, digest []byte) []byte {
	b := append([]byte{stampVersion}, m.Digest[:]...)
	b = binary.LittleEndian.AppendUint16(b, alg)
	return append(b, digest...)
}

// verityStamped reports whether f is a verity file whose stamp says that
// its measurement is that of m's bytes.
func verityStamped(f *os.File, m *Member) bool {
	alg, digest, ok := measureVerity(f.Fd())
	if !ok {
		return false
	}
	want := verityValue(m, alg, digest)
	got := make([]byte, len(want)+1)
	n, err := unix.Fgetxattr(int(f.Fd()), verityAttr, got)
	return err == nil && bytes.Equal(got[:n], want)
}

// enableVerity makes f, m's member file, whose bytes were just verified
// and cannot have changed since (its lease holds), a verity file
// (SHA-256, 4 KiB blocks; the kernel reads the file once to build the
// tree) and stamps it. It reports whether it did; where the file system
// has no fs-verity (EOPNOTSUPP, ENOTTY) nothing changes.
func enableVerity(f *os.File, m *Member) bool {
	arg := unix.FsverityEnableArg{Version: 1, Hash_algorithm: unix.FS_VERITY_HASH_ALG_SHA256, Block_size: 4096}
	// EEXIST: a verity file already, whose stamp was lost.
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.FS_IOC_ENABLE_VERITY, uintptr(unsafe.Pointer(&arg))); e != 0 && e != unix.EEXIST {
		return false
	}
	alg, digest, ok := measureVerity(f.Fd())
	return ok && unix.Fsetxattr(int(f.Fd()), verityAttr, verityValue(m, alg, digest), 0) == nil
}
