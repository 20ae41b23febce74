package versions

import (
	"bytes"
	"hash/maphash"

	"github.com/pinfs/pinfs/verify/b3"
)

// Table is a set of entries looked up by version: a loaded digest cache, or
// one a caller builds with NewTable and Add.
//
// Add must not run concurrently with any other method; Lookup and Len may
// run concurrently with each other.
//
// A table of millions of entries must fit beside a pin, so it is a hash
// table of its own rather than a Go map of strings: keys and version ids
// are packed into large chunks of bytes, every entry takes 56 bytes in
// chunked arrays plus 5 to 11 bytes of open-addressing index
// (BenchmarkTable1M measures the whole).
type Table struct {
	// Skipped counts what Load left out: segments that are missing, do not
	// hash to their names, do not parse or belong to another bucket, and a
	// head that is not one pinfs writes.
	Skipped int
	// Bytes counts the bytes Load read: the head and every segment.
	Bytes int64

	seed  maphash.Seed
	slots []uint32 // 0: empty, else 1 + an index into recs; len 0 or a power of two
	recs  [][]rec  // chunks of recChunk entries
	text  [][]byte // chunks of textChunk bytes: each entry's key then version id
}

const (
	recChunk  = 4096
	textChunk = 256 << 10
	maxProbe  = maxKey + maxVersion
)

// rec is an entry but for its key and version id, which are the klen and
// vlen bytes at text[off/textChunk][off%textChunk:].
type rec struct {
	digest     b3.Sum
	size       int64
	off        uint64
	klen, vlen uint16
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{} }

// Add adds entries; of two entries of one version, the last one added is
// kept. Load adds segments in the head's order, so a version read again
// (by --rehash, say) and appended later replaces what an older segment
// said about it. An entry whose key or version id
// is longer than a segment allows (1024 bytes) is left out.
func (t *Table) Add(es ...Entry) {
	var buf [maxProbe]byte
	for i := range es {
		e := &es[i]
		if p, ok := probe(&buf, e.Key, e.VersionID); ok {
			t.add(p, len(e.Key), e.Size, &e.Digest)
		}
	}
}

// addBytes is Add for the byte slices of parse.
func (t *Table) addBytes(key, version []byte, size int64, d *b3.Sum) {
	var buf [maxProbe]byte
	if p, ok := probe(&buf, key, version); ok {
		t.add(p, len(key), size, d)
	}
}

// Lookup returns the entry of key at versionID, if t has one.
func (t *Table) Lookup(key, versionID string) (Entry, bool) {
	var buf [maxProbe]byte
	p, ok := probe(&buf, key, versionID)
	if !ok {
		return Entry{}, false
	}
	slot, found := t.find(p, len(key))
	if !found {
		return Entry{}, false
	}
	r := t.rec(t.slots[slot])
	return Entry{Key: key, VersionID: versionID, Size: r.size, Digest: r.digest}, true
}

// Len returns the number of entries in t.
func (t *Table) Len() int {
	if len(t.recs) == 0 {
		return 0
	}
	return (len(t.recs)-1)*recChunk + len(t.recs[len(t.recs)-1])
}

// probe returns key and version one after the other in buf, or false if
// they are too long for a table.
func probe[S string | []byte](buf *[maxProbe]byte, key, version S) ([]byte, bool) {
	if len(key) > maxKey || len(version) > maxVersion {
		return nil, false
	}
	return append(append(buf[:0], key...), version...), true
}

// find returns the slot of the entry whose key and version id are p, the
// key being its first klen bytes, and whether there is one; if not, the
// slot is the empty one where it belongs (-1 for a table without slots).
func (t *Table) find(p []byte, klen int) (int, bool) {
	if len(t.slots) == 0 {
		return -1, false
	}
	mask := len(t.slots) - 1
	for i := int(maphash.Bytes(t.seed, p)) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return i, false
		}
		if r := t.rec(s); int(r.klen) == klen && bytes.Equal(t.textOf(r), p) {
			return i, true
		}
	}
}

// add adds the entry whose key and version id are p (the key being the
// first klen bytes) unless t has it.
func (t *Table) add(p []byte, klen int, size int64, d *b3.Sum) {
	if len(t.slots) == 0 {
		t.seed = maphash.MakeSeed()
		t.slots = make([]uint32, 64)
	}
	n := t.Len()
	if n+1 > len(t.slots)/4*3 {
		t.grow()
	}
	slot, found := t.find(p, klen)
	if found {
		r := t.rec(t.slots[slot])
		r.digest, r.size = *d, size
		return
	}
	if n%recChunk == 0 {
		t.recs = append(t.recs, make([]rec, 0, recChunk))
	}
	last := &t.recs[len(t.recs)-1]
	*last = append(*last, rec{digest: *d, size: size, off: t.store(p), klen: uint16(klen), vlen: uint16(len(p) - klen)})
	t.slots[slot] = uint32(n + 1)
}

// store appends p to the text and returns its offset.
func (t *Table) store(p []byte) uint64 {
	if len(t.text) == 0 || len(p) > textChunk-len(t.text[len(t.text)-1]) {
		t.text = append(t.text, make([]byte, 0, textChunk))
	}
	i := len(t.text) - 1
	off := uint64(i)*textChunk + uint64(len(t.text[i]))
	t.text[i] = append(t.text[i], p...)
	return off
}

// textOf returns r's key and version id, one after the other.
func (t *Table) textOf(r *rec) []byte {
	c := t.text[r.off/textChunk]
	start := int(r.off % textChunk)
	return c[start : start+int(r.klen)+int(r.vlen)]
}

// grow doubles the slots and places every entry again.
func (t *Table) grow() {
	old := t.slots
	t.slots = make([]uint32, 2*len(old))
	mask := len(t.slots) - 1
	for _, s := range old {
		if s == 0 {
			continue
		}
		i := int(maphash.Bytes(t.seed, t.textOf(t.rec(s)))) & mask
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

// rec returns the entry slot s names.
func (t *Table) rec(s uint32) *rec {
	i := int(s - 1)
	return &t.recs[i/recChunk][i%recChunk]
}
