package versions

import "github.com/pinfs/pinfs/verify/b3"

// Table is a set of entries looked up by version: a loaded digest cache, or
// one a caller builds with NewTable and Add.
//
// Add must not run concurrently with any other method; Lookup and Len may
// run concurrently with each other.
type Table struct {
	// Skipped counts what Load left out: segments that are missing, do not
	// hash to their names, do not parse or belong to another bucket, and a
	// head that is not one pinfs writes.
	Skipped int
	// Bytes counts the bytes Load read: the head and every segment.
	Bytes int64

	m map[string]value
}

// value is what the table keeps of an entry besides its map key
// (key + "\x00" + version id; a version id never holds a NUL).
type value struct {
	size   int64
	digest b3.Sum
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{m: make(map[string]value)} }

// Add adds entries whose version is not in t yet: of two entries of one
// version, the first one added is kept.
func (t *Table) Add(es ...Entry) {
	for i := range es {
		add(t, es[i].Key, es[i].VersionID, es[i].Size, &es[i].Digest)
	}
}

// addBytes is add for the byte slices of parse.
func (t *Table) addBytes(key, version []byte, size int64, d *b3.Sum) {
	add(t, key, version, size, d)
}

// add adds one entry unless its version is in t, allocating only the
// string of the map key.
func add[S string | []byte](t *Table, key, version S, size int64, d *b3.Sum) {
	if t.m == nil {
		t.m = make(map[string]value)
	}
	var buf [256]byte
	k := mapKey(buf[:0], key, version)
	if _, ok := t.m[string(k)]; ok {
		return
	}
	t.m[string(k)] = value{size: size, digest: *d}
}

// Lookup returns the entry of key at versionID, if t has one.
func (t *Table) Lookup(key, versionID string) (Entry, bool) {
	var buf [256]byte
	v, ok := t.m[string(mapKey(buf[:0], key, versionID))]
	if !ok {
		return Entry{}, false
	}
	return Entry{Key: key, VersionID: versionID, Size: v.size, Digest: v.digest}, true
}

// Len returns the number of entries in t.
func (t *Table) Len() int { return len(t.m) }

// mapKey appends the map key of a version to b.
func mapKey[S string | []byte](b []byte, key, version S) []byte {
	b = append(b, key...)
	b = append(b, 0)
	return append(b, version...)
}
