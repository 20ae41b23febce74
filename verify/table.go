package verify

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pinfs/pinfs/verify/b3"
)

// Table is a member table in compact form: the members in table order,
// addressed by index, and the tree their paths make. It holds what the
// table says, exactly (Member(i) gives back every field), in a layout of
// flat sections (see sec) that is either built in memory or mapped from
// an index file that a metadata cache keeps (see Indexer): digests are
// kept as 32 bytes, an id equal to its path and a CAS address equal to
// the digest are not stored twice, bucket names, splits and key prefixes
// (the key minus the member path) are interned, and quoted MD5 ETags take
// 16 bytes.
//
// A Table is immutable and safe for concurrent use. Strings it returns
// share its memory: they stay valid until Close, which a table held for
// the life of the process (a mount's) never needs; one that is dropped
// before (the origin's) is closed once no one reads it, and what outlives
// that is copied first (strings.Clone).
type Table struct {
	cur atomic.Pointer[layout]
	n   int
	// sorted reports that paths never decrease in table order (ParseTable
	// guarantees that they strictly increase); only a sorted table has a
	// tree.
	sorted bool
	// idsArePaths reports that every member's id equals its path, as in
	// every table pinfs pin writes.
	idsArePaths bool
	dirs        int

	// repair, set for a mapped table, rebuilds the layout when a chunk of
	// the index fails its digest after the index was opened.
	repair   func() (*layout, error)
	repairMu sync.Mutex // guards old, closed and the repair
	old      []*layout  // layouts replaced by a repair, unmapped at Close
	closed   bool
}

// rec flags of an open record.
const (
	flagID        = 1 << iota // id stored (it differs from the path)
	flagDigest                // digest stored as text: not blake3:<64 lower-case hex>; sum is zero
	flagCAS                   // the member has a cas source
	flagCASRaw                // cas stored as text: it differs from the digest
	flagSplitRaw              // split stored as text
	flagS3                    // the member has an s3 source
	flagBucketRaw             // bucket stored as text
	flagKeyRaw                // key stored as text
	flagETag                  // the s3 source has an etag
	flagETagMD5               // the etag is `"<32 hex>"`, stored as 16 bytes
)

// maxStrs is how many strings a Table interns; more are stored as text.
const maxStrs = 1<<16 - 1

// layout returns the current layout; damaged reports that l failed a
// chunk's digest and returns the layout to retry with.
func (t *Table) layout() *layout { return t.cur.Load() }

// damaged replaces l, whose index failed a chunk's digest, by a layout
// rebuilt from the member table, once; a table that cannot be rebuilt
// cannot be served, and the process stops rather than serve a byte of it.
func (t *Table) damaged(l *layout) *layout {
	t.repairMu.Lock()
	defer t.repairMu.Unlock()
	if cur := t.cur.Load(); cur != l {
		return cur
	}
	if t.repair == nil {
		panic("verify: a member table built in memory failed its own digest")
	}
	nl, err := t.repair()
	if err != nil {
		panic(fmt.Sprintf("pinfs: the index of a member table is damaged and the table cannot be read again: %v", err))
	}
	// Strings of l may still be in use: l stays mapped until Close.
	t.old = append(t.old, l)
	t.cur.Store(nl)
	return nl
}

// Len returns the number of members.
func (t *Table) Len() int { return t.n }

// Size returns the size of member i.
func (t *Table) Size(i int) int64 {
	for l := t.layout(); ; l = t.damaged(l) {
		if s, ok := l.size(i); ok {
			return s
		}
	}
}

// Sum returns the BLAKE3 digest of member i, and false when its digest is
// not a well-formed blake3:<64 lower-case hex> (CheckMembers reports it).
func (t *Table) Sum(i int) (b3.Sum, bool) {
	for l := t.layout(); ; l = t.damaged(l) {
		if r, _, ok := l.open(i); ok {
			return b3.Sum(r[:32]), le.Uint16(r[40:])&flagDigest == 0
		}
	}
}

// Path returns the path of member i.
func (t *Table) Path(i int) string {
	for l := t.layout(); ; l = t.damaged(l) {
		if p, ok := l.path(i); ok {
			return p
		}
	}
}

// ID returns the id of member i.
func (t *Table) ID(i int) string { return t.decode(i).id }

// Split returns the split of member i, or "".
func (t *Table) Split(i int) string { return t.decode(i).split }

// Digest returns the digest of member i as the table writes it.
func (t *Table) Digest(i int) string {
	d := t.decode(i)
	return d.digestString()
}

// AppendDigest appends the digest of member i, as Digest returns it, to b
// without allocating: code that writes a line per member of a large
// snapshot (a run's canonical consumed list) uses it.
func (t *Table) AppendDigest(b []byte, i int) []byte {
	d := t.decode(i)
	if d.digestRaw {
		return append(b, d.digest...)
	}
	return hex.AppendEncode(append(b, b3.Prefix...), d.sum[:])
}

// Version returns the pinned S3 VersionId of member i and true, or "" and
// false for a member that has no S3 source (its bytes are in the store's
// content-addressed area: see AppendCAS).
func (t *Table) Version(i int) (string, bool) {
	d := t.decode(i)
	return d.versionID, d.hasS3
}

// AppendCAS appends the content-addressed digest of member i (Member's
// CAS field) to b, and nothing when it has none.
func (t *Table) AppendCAS(b []byte, i int) []byte {
	d := t.decode(i)
	switch {
	case d.casRaw:
		return append(b, d.cas...)
	case d.hasCAS:
		return t.AppendDigest(b, i)
	}
	return b
}

// Member returns member i with all its fields.
func (t *Table) Member(i int) Member {
	d := t.decode(i)
	m := Member{ID: d.id, Path: d.path, Split: d.split, Size: d.size, Digest: d.digestString()}
	if d.hasCAS {
		m.CAS = d.cas
		if !d.casRaw {
			m.CAS = m.Digest
		}
	}
	if d.hasS3 {
		m.S3 = &S3Source{Bucket: d.bucket, Key: d.key(), VersionID: d.versionID, ETag: d.etagString()}
	}
	return m
}

// Members returns every member as a new slice. It costs a few hundred
// bytes per member: code that serves large snapshots uses the accessors.
func (t *Table) Members() []Member {
	ms := make([]Member, t.Len())
	for i := range ms {
		ms[i] = t.Member(i)
	}
	return ms
}

// NewTable returns the Table of ms, in the same order, built in memory.
// It does not check ms: CheckMembers does, and EncodeMembers refuses what
// cannot be encoded.
func NewTable(ms []Member) *Table {
	b := newBuilder(newInterner())
	var f fields
	for i := range ms {
		m := &ms[i]
		f = fields{
			id: []byte(m.ID), path: []byte(m.Path), split: []byte(m.Split), size: m.Size,
			digest: []byte(m.Digest), cas: []byte(m.CAS), hasCAS: m.CAS != "",
		}
		if s := m.S3; s != nil {
			f.hasS3 = true
			f.bucket, f.key, f.versionID, f.etag = []byte(s.Bucket), []byte(s.Key), []byte(s.VersionID), []byte(s.ETag)
		}
		b.add(&f)
	}
	sorted := true
	for i := 1; i < len(ms); i++ {
		if ms[i-1].Path > ms[i].Path {
			sorted = false
			break
		}
	}
	a := newAssembler(&memSink{}, sorted)
	a.part(&b.part)
	t, _, err := a.finish(b.strs.strs, nil)
	if err != nil {
		panic(fmt.Sprintf("verify: building a table in memory: %v", err)) // memSink does not fail
	}
	return t
}

// decoded is member i with its strings read from the arena and not yet
// joined: building the key, the digest text or an MD5 ETag allocates, and
// the checks need none of them.
type decoded struct {
	size              int64
	sum               b3.Sum
	path, id, split   string
	digest, cas       string // the digest when stored as text; cas when it is not the digest
	digestRaw, casRaw bool
	hasCAS, hasS3     bool
	bucket            string
	keyPrefix, keyRaw string // the key is keyRaw when keyIsRaw, else keyPrefix + path
	keyIsRaw          bool
	versionID, etag   string // etag: the text, or the 16 bytes when etagMD5
	hasETag, etagMD5  bool
}

func (d *decoded) digestString() string {
	if d.digestRaw {
		return d.digest
	}
	return d.sum.String()
}

func (d *decoded) key() string {
	if d.keyIsRaw {
		return d.keyRaw
	}
	return d.keyPrefix + d.path
}

func (d *decoded) keyEmpty() bool {
	if d.keyIsRaw {
		return d.keyRaw == ""
	}
	return d.keyPrefix == "" && d.path == ""
}

func (d *decoded) etagString() string {
	switch {
	case !d.hasETag:
		return ""
	case d.etagMD5:
		return `"` + hex.EncodeToString([]byte(d.etag)) + `"`
	}
	return d.etag
}

func (t *Table) decode(i int) decoded {
	for l := t.layout(); ; l = t.damaged(l) {
		if d, ok := l.decode(i); ok {
			return d
		}
	}
}

// decode reads member i, or reports false when a chunk it needs failed
// its digest.
func (l *layout) decode(i int) (d decoded, ok bool) {
	if d.size, ok = l.size(i); !ok {
		return d, false
	}
	if d.path, ok = l.path(i); !ok {
		return d, false
	}
	r, details, ok := l.open(i)
	if !ok {
		return d, false
	}
	d.sum = b3.Sum(r[:32])
	f := le.Uint16(r[40:])
	c := cursor{details}
	d.id = d.path
	if f&flagID != 0 {
		d.id = c.str()
	}
	if d.digestRaw = f&flagDigest != 0; d.digestRaw {
		d.digest = c.str()
	}
	d.hasCAS, d.casRaw = f&flagCAS != 0, f&flagCASRaw != 0
	if d.casRaw {
		d.cas = c.str()
	} else if d.hasCAS && d.digestRaw {
		d.cas = d.digest
	}
	if f&flagSplitRaw != 0 {
		d.split = c.str()
	} else {
		d.split = l.strs[le.Uint16(r[42:])]
	}
	if d.hasS3 = f&flagS3 != 0; !d.hasS3 {
		return d, true
	}
	if f&flagBucketRaw != 0 {
		d.bucket = c.str()
	} else {
		d.bucket = l.strs[le.Uint16(r[44:])]
	}
	if d.keyIsRaw = f&flagKeyRaw != 0; d.keyIsRaw {
		d.keyRaw = c.str()
	} else {
		d.keyPrefix = l.strs[le.Uint16(r[46:])]
	}
	d.versionID = c.str()
	d.hasETag, d.etagMD5 = f&flagETag != 0, f&flagETagMD5 != 0
	switch {
	case d.etagMD5:
		d.etag = c.raw(16)
	case d.hasETag:
		d.etag = c.str()
	}
	return d, true
}

// cursor reads the detail strings of one member.
type cursor struct{ s string }

// str reads a uvarint length and that many bytes.
func (c *cursor) str() string {
	var n uint64
	var shift uint
	k := 0
	for {
		b := c.s[k]
		k++
		n |= uint64(b&0x7f) << shift
		if b < 0x80 {
			break
		}
		shift += 7
	}
	v := c.s[k : k+int(n)]
	c.s = c.s[k+int(n):]
	return v
}

func (c *cursor) raw(n int) string {
	v := c.s[:n]
	c.s = c.s[n:]
	return v
}

// parseSum decodes s into sum when it is exactly blake3:<64 lower-case
// hex>, the form b3.Parse accepts.
func parseSum(sum *b3.Sum, s []byte) bool {
	h, ok := bytes.CutPrefix(s, []byte(b3.Prefix))
	return ok && len(h) == 64 && decodeLowerHex(sum[:], h)
}

// isMD5ETag decodes e into md5 when it is `"<32 lower-case hex>"`.
func isMD5ETag(e []byte, md5 *[16]byte) bool {
	return len(e) == 34 && e[0] == '"' && e[33] == '"' && decodeLowerHex(md5[:], e[1:33])
}

// decodeLowerHex decodes the lower-case hex h into dst, which has half its
// length, and reports whether h was lower-case hex.
func decodeLowerHex(dst, h []byte) bool {
	var bad byte
	for i := range dst {
		hi, lo := unhex[h[2*i]], unhex[h[2*i+1]]
		bad |= hi | lo
		dst[i] = hi<<4 | lo&0xf
	}
	return bad&0xf0 == 0
}

// unhex maps lower-case hex digits to their value and every other byte
// to 0xff.
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range []byte("0123456789abcdef") {
		t[c] = byte(i)
	}
	return t
}()
