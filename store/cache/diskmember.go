package cache

// The files of one member in the disk tier (see the Disk doc, "Layout"):
// its whole-member file, <hex>, exactly the member's bytes, mode 0400; or,
// while some of its blocks are missing, its partial file, <hex>.part,
// mode 0600, which holds each block present at the block's offset and,
// past the data at trailerOff(size), a trailer: the member's size (8
// bytes, big-endian), then one bit per block, set when the block is there.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/bits"

	"golang.org/x/sys/unix"
)

// partSuffix ends the name of a member's partial file.
const partSuffix = ".part"

// numBlocks returns the number of blocks of a member of size bytes.
func numBlocks(size int64) int64 { return (size + BlockSize - 1) / BlockSize }

// blockLen returns the length of block i of a member of size bytes, or 0
// when the member has no block i.
func blockLen(size, i int64) int64 {
	if size <= 0 || i < 0 || i >= numBlocks(size) {
		return 0
	}
	return min(BlockSize, size-i*BlockSize)
}

// trailerOff returns the offset of a partial file's trailer: the member's
// size rounded up to a whole block, so that the last block's bytes and the
// trailer never share a block of the file and the data keeps its offsets.
func trailerOff(size int64) int64 { return numBlocks(size) * BlockSize }

// partLen returns the length of the partial file of a member of size
// bytes: the data, then the trailer.
func partLen(size int64) int64 { return trailerOff(size) + 8 + (numBlocks(size)+7)/8 }

// errDamaged reports a member file that is not what its name says (wrong
// size, a bad trailer, not a regular file). It is removed.
var errDamaged = errors.New("damaged member file")

// trailer is a partial file's trailer: the member's size and its bitmap.
type trailer struct {
	size int64
	bits []byte
}

// newTrailer returns the trailer of an empty partial file.
func newTrailer(size int64) trailer {
	return trailer{size: size, bits: make([]byte, (numBlocks(size)+7)/8)}
}

func (t trailer) has(i int64) bool { return t.bits[i/8]&(1<<(i%8)) != 0 }
func (t trailer) set(i int64)      { t.bits[i/8] |= 1 << (i % 8) }
func (t trailer) clear(i int64)    { t.bits[i/8] &^= 1 << (i % 8) }

// held returns the bytes and blocks the partial file holds: a popcount of
// the bitmap, the last block counted at its exact length.
func (t trailer) held() (n, blocks int64) {
	for _, b := range t.bits {
		blocks += int64(bits.OnesCount8(b))
	}
	n = blocks * BlockSize
	if last := numBlocks(t.size) - 1; t.has(last) {
		n -= BlockSize - blockLen(t.size, last)
	}
	return n, blocks
}

// full reports whether every block is there.
func (t trailer) full() bool {
	_, b := t.held()
	return b == numBlocks(t.size)
}

// encode returns the trailer's bytes.
func (t trailer) encode() []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(t.bits)), uint64(t.size))
	return append(b, t.bits...)
}

// readTrailer reads the trailer of the partial file fd, of fileSize
// bytes. The file's length tells the number of blocks (the trailer is far
// shorter than a block), and the size recorded must agree with it.
func readTrailer(fd int, fileSize int64) (trailer, error) {
	nb := fileSize / BlockSize
	if nb < 2 {
		return trailer{}, errDamaged // a member of one block has no partial file
	}
	buf := make([]byte, fileSize-nb*BlockSize)
	if len(buf) < 8 {
		return trailer{}, errDamaged
	}
	if err := preadFull(fd, buf, nb*BlockSize); err != nil {
		return trailer{}, err
	}
	size := int64(binary.BigEndian.Uint64(buf))
	if size <= BlockSize || numBlocks(size) != nb || partLen(size) != fileSize {
		return trailer{}, errDamaged
	}
	return trailer{size: size, bits: buf[8:]}, nil
}

// hasBit reads only what one lookup needs of fd's trailer, the member's
// size and block i's bit: a trailer can be long (16 KiB for 128 GiB).
func hasBit(fd int, size, i int64) (bool, error) {
	var buf [8]byte
	if err := preadFull(fd, buf[:], trailerOff(size)); err != nil {
		return false, err
	}
	if int64(binary.BigEndian.Uint64(buf[:])) != size {
		return false, errDamaged
	}
	if err := preadFull(fd, buf[:1], trailerOff(size)+8+i/8); err != nil {
		return false, err
	}
	return buf[0]&(1<<(i%8)) != 0, nil
}

// preadFull reads len(b) bytes of fd at off.
func preadFull(fd int, b []byte, off int64) error {
	for n := 0; n < len(b); {
		k, err := unix.Pread(fd, b[n:], off+int64(n))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return &fs.PathError{Op: "read", Path: "member file", Err: err}
		case k == 0:
			return fmt.Errorf("member file: %w", io.ErrUnexpectedEOF)
		}
		n += k
	}
	return nil
}

// pwriteAll writes b to fd at off.
func pwriteAll(fd int, b []byte, off int64) error {
	for n := 0; n < len(b); {
		k, err := unix.Pwrite(fd, b[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "write", Path: "member file", Err: err}
		}
		n += k
	}
	return nil
}
