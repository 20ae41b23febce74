package verify

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/pinfs/pinfs/verify/b3"
)

// IndexVersion is the format version of table index files. A change to
// the layout of any section changes it, and an index of another version
// is not read (it is rebuilt).
const IndexVersion = 1

// indexMagic opens every index header.
const indexMagic = "pinfs table index\n"

// header is what an index's header file says: the table it was built
// from, the counts the manifest must agree with, and the length and
// chunk digests of every section. It ends in the BLAKE3 of all of it.
type header struct {
	table                Digest
	members, bytes, dirs int64
	sorted, idsArePaths  bool
	lens                 [nsec]int64
	sums                 [nsec][]b3.Sum
}

func chunks(n int64) int64 { return (n + 1<<chunkShift - 1) >> chunkShift }

func (h *header) encode() []byte {
	b := append([]byte(indexMagic), 0, 0, 0, 0)
	le.PutUint32(b[len(indexMagic):], IndexVersion)
	b = append(b, byte(len(h.table)))
	b = append(b, h.table...)
	for _, v := range []int64{h.members, h.bytes, h.dirs} {
		b = le.AppendUint64(b, uint64(v))
	}
	var flags byte
	if h.sorted {
		flags |= 1
	}
	if h.idsArePaths {
		flags |= 2
	}
	b = append(b, flags)
	for _, n := range h.lens {
		b = le.AppendUint64(b, uint64(n))
	}
	for _, ss := range h.sums {
		for _, s := range ss {
			b = append(b, s[:]...)
		}
	}
	sum := b3.Of(b)
	return append(b, sum[:]...)
}

// errForeign is the error of an index that is intact but not for the
// table asked for (another table or another format version).
var errForeign = errors.New("built for another table or format version")

// decodeHeader parses and checks a header file.
func decodeHeader(b []byte) (*header, error) {
	if len(b) < len(indexMagic)+4+32 || !bytes.HasPrefix(b, []byte(indexMagic)) {
		return nil, errors.New("not an index header")
	}
	body, sum := b[:len(b)-32], b3.Sum(b[len(b)-32:])
	if b3.Of(body) != sum {
		return nil, errors.New("header does not match its digest")
	}
	r := body[len(indexMagic):]
	if v := le.Uint32(r); v != IndexVersion {
		return nil, fmt.Errorf("format version %d, not %d: %w", v, IndexVersion, errForeign)
	}
	r = r[4:]
	bad := errors.New("header too short")
	if len(r) < 1 || len(r) < 1+int(r[0]) {
		return nil, bad
	}
	h := &header{table: Digest(r[1 : 1+r[0]])}
	r = r[1+r[0]:]
	if len(r) < 3*8+1+int(nsec)*8 {
		return nil, bad
	}
	h.members, h.bytes, h.dirs = int64(le.Uint64(r)), int64(le.Uint64(r[8:])), int64(le.Uint64(r[16:]))
	h.sorted, h.idsArePaths = r[24]&1 != 0, r[24]&2 != 0
	r = r[25:]
	total := int64(0)
	for s := range h.lens {
		h.lens[s] = int64(le.Uint64(r[8*s:]))
		if h.lens[s] < 0 || h.lens[s] > 1<<50 {
			return nil, errors.New("section length out of range")
		}
		total += chunks(h.lens[s])
	}
	r = r[8*nsec:]
	if int64(len(r)) != 32*total {
		return nil, errors.New("chunk digests do not match the section lengths")
	}
	for s := range h.sums {
		n := chunks(h.lens[s])
		h.sums[s] = make([]b3.Sum, n)
		for c := range h.sums[s] {
			copy(h.sums[s][c][:], r[32*c:])
		}
		r = r[32*n:]
	}
	return h, nil
}

// check reports whether h describes an index of the table of m that a
// Table can be read from.
func (h *header) check(m *Manifest) error {
	td, _ := m.Members.Digest()
	if h.table != td {
		return fmt.Errorf("index of table %s, not %s: %w", h.table, td, errForeign)
	}
	if h.members != m.Members.Count || h.bytes != m.Members.Bytes {
		return fmt.Errorf("index counts %d members of %d bytes, manifest %d of %d", h.members, h.bytes, m.Members.Count, m.Members.Bytes)
	}
	if !h.sorted || h.lens[secWalk] != walkSize*h.members || h.lens[secOpen] != openSize*h.members ||
		h.lens[secDirs] != dirSize*h.dirs || h.lens[secOf] != h.lens[secKids] || h.lens[secOf]%4 != 0 || h.dirs < 1 {
		return errors.New("index sections do not match its counts")
	}
	return nil
}
