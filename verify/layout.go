package verify

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/pinfs/pinfs/verify/b3"
)

// sec names one section of a table's layout. A Table's bytes are these
// sections, in memory or mapped from an index file; each is read on its
// own, so that a walk of the tree (names, sizes, directories) touches
// neither the digests nor the versions that only an open needs.
type sec uint8

const (
	secWalk    sec = iota // per member: size, offset of its path in secNames (walkSize)
	secNames              // the paths, concatenated
	secOpen               // per member: digest, offset in secDetails, flags, interned strings (openSize)
	secDetails            // the other strings of each member, as uvarint length and bytes
	secStrs               // the interned strings, as uvarint length and bytes
	secOf                 // per node: its member, or ^directory (4 bytes)
	secKids               // the children of every directory in name order, as node numbers (4 bytes each)
	secDirs               // per directory (dirSize)
	nsec
)

// secFiles are the sections' file names in an index.
var secFiles = [nsec]string{"walk", "names", "open", "details", "strs", "of", "kids", "dirs"}

const (
	walkSize = 16 // size u64, name offset u64
	openSize = 48 // digest [32], detail offset u64, flags u16, split u16, bucket u16, keyPrefix u16
	dirSize  = 32 // name offset u64, name length u32, node i32, parent i32, first i32, n i32, nsub u32
)

// chunkShift sets the unit of an index file's lazy verification: 64 KiB.
const chunkShift = 16

var le = binary.LittleEndian

// layout is the bytes of a Table. Sections are never written once the
// layout is built. A layout mapped from an index file checks every 64 KiB
// chunk of a section against its digest the first time it is read; a
// layout built in memory (sums nil) is trusted as it is.
type layout struct {
	b    [nsec][]byte
	sums [nsec][]b3.Sum        // chunk digests, nil when built in memory
	done [nsec][]atomic.Uint64 // chunks verified, by bit
	strs []string              // the interned strings; strs[0] == ""
	maps [][]byte              // the sections mapped from files, for unmap
}

// need reports whether bytes [off, off+n) of section s may be read: they
// are in memory, or every chunk they touch matches its digest.
func (l *layout) need(s sec, off, n int) bool {
	if l.sums[s] == nil || n <= 0 {
		return true
	}
	done := l.done[s]
	for c := off >> chunkShift; c <= (off+n-1)>>chunkShift; c++ {
		w, bit := &done[c>>6], uint64(1)<<(c&63)
		if w.Load()&bit != 0 {
			continue
		}
		b := l.b[s]
		if b3.Of(b[c<<chunkShift:min((c+1)<<chunkShift, len(b))]) != l.sums[s][c] {
			return false
		}
		w.Or(bit)
	}
	return true
}

// str returns bytes [a, b) of section s as a string that shares them.
func (l *layout) str(s sec, a, b uint64) string {
	if a == b {
		return ""
	}
	return unsafe.String(&l.b[s][a], int(b-a))
}

// members returns the number of members.
func (l *layout) members() int { return len(l.b[secWalk]) / walkSize }

// size returns the size of member i.
func (l *layout) size(i int) (int64, bool) {
	off := i * walkSize
	if !l.need(secWalk, off, 8) {
		return 0, false
	}
	return int64(le.Uint64(l.b[secWalk][off:])), true
}

// path returns the path of member i.
func (l *layout) path(i int) (string, bool) {
	_, p, ok := l.record(i, secWalk, walkSize, 8, secNames)
	return p, ok
}

// open returns the open record of member i and its detail strings.
func (l *layout) open(i int) (r []byte, details string, ok bool) {
	return l.record(i, secOpen, openSize, 32, secDetails)
}

// record returns record i of section s, whose records are size bytes and
// hold at byte at the offset of their bytes in section data, and those bytes:
// up to the next record's offset, or the end of data for the last record.
func (l *layout) record(i int, s sec, size, at int, data sec) (r []byte, b string, ok bool) {
	off := i * size
	recs := l.b[s]
	if !l.need(s, off, size) {
		return nil, "", false
	}
	start, end := le.Uint64(recs[off+at:]), uint64(len(l.b[data]))
	if next := off + size; next < len(recs) {
		if !l.need(s, next, size) {
			return nil, "", false
		}
		end = le.Uint64(recs[next+at:])
	}
	if !l.need(data, int(start), int(end-start)) {
		return nil, "", false
	}
	return recs[off : off+size], l.str(data, start, end), true
}

// int32At returns entry k of a section of int32s.
func (l *layout) int32At(s sec, k int) (int32, bool) {
	if !l.need(s, 4*k, 4) {
		return 0, false
	}
	return int32(le.Uint32(l.b[s][4*k:])), true
}

// dirRec is one directory of the tree.
type dirRec struct {
	nameOff        uint64 // in secNames
	nameLen        uint32
	node, parent   int32 // node -1 for the root, which is its own parent
	first, n, nsub int32 // children kids[first:first+n]; nsub of them are directories
}

func (l *layout) dir(d int) (dirRec, bool) {
	off := d * dirSize
	if !l.need(secDirs, off, dirSize) {
		return dirRec{}, false
	}
	b := l.b[secDirs][off : off+dirSize]
	return dirRec{
		nameOff: le.Uint64(b), nameLen: le.Uint32(b[8:]),
		node: int32(le.Uint32(b[12:])), parent: int32(le.Uint32(b[16:])),
		first: int32(le.Uint32(b[20:])), n: int32(le.Uint32(b[24:])), nsub: int32(le.Uint32(b[28:])),
	}, true
}

func appendDir(b []byte, d *dirRec) []byte {
	b = le.AppendUint64(b, d.nameOff)
	b = le.AppendUint32(b, d.nameLen)
	for _, v := range []int32{d.node, d.parent, d.first, d.n, d.nsub} {
		b = le.AppendUint32(b, uint32(v))
	}
	return b
}

// dirName returns the name of directory d ("" for the root).
func (l *layout) dirName(r *dirRec) (string, bool) {
	if !l.need(secNames, int(r.nameOff), int(r.nameLen)) {
		return "", false
	}
	return l.str(secNames, r.nameOff, r.nameOff+uint64(r.nameLen)), true
}

// parseStrs decodes the interned strings of section secStrs.
func parseStrs(b []byte) ([]string, bool) {
	strs := []string{""}
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, false
		}
		strs = append(strs, string(b[k:k+int(n)]))
		b = b[k+int(n):]
	}
	return strs, true
}
