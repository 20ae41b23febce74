package verify

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"sync"

	"github.com/pinfs/pinfs/verify/b3"
)

// Table is a member table in compact form: the members in table order,
// addressed by index. It holds what the table says, exactly (Member(i)
// gives back every field), but at a fraction of the memory of a []Member:
// digests are kept as 32 bytes, an id equal to its path and a CAS address
// equal to the digest are not stored twice, bucket names, splits and key
// prefixes (the key minus the member path) are interned, quoted MD5 ETags
// take 16 bytes, and the remaining strings share a few large buffers
// without any JSON syntax.
//
// A Table is immutable and safe for concurrent use. Strings it returns
// share its memory and stay valid as long as they are referenced.
type Table struct {
	recs   []rec
	arenas []string // strings of the members, one buffer per parse chunk
	strs   []string // interned strings; strs[0] == ""
	// sorted reports that paths never decrease in table order (ParseTable
	// guarantees that they strictly increase).
	sorted bool
	// idsArePaths reports that every member's id equals its path, as in
	// every table pinfs pin writes.
	idsArePaths bool
}

// rec is one member. Its variable-length strings are in arena
// arenas[off>>arenaShift] at offset off&arenaMask, each as a uvarint length
// and the bytes, in this order: path, id (flagID), digest (flagDigest), cas
// (flagCASRaw), split (flagSplitRaw), then for S3 members bucket
// (flagBucketRaw), key (flagKeyRaw), versionId, and etag (flagETag; 16
// raw bytes with flagETagMD5).
type rec struct {
	size  int64
	sum   b3.Sum // the digest, unless flagDigest
	off   uint64
	flags uint16
	split uint16 // strs index, unless flagSplitRaw
	// bucket and keyPrefix are strs indexes for S3 members; the key is
	// strs[keyPrefix] + path unless flagKeyRaw.
	bucket, keyPrefix uint16
}

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

const (
	arenaShift = 48
	arenaMask  = 1<<arenaShift - 1
	maxArenas  = 1 << (64 - arenaShift)
	// maxStrs is how many strings a Table interns; more are stored as text.
	maxStrs = 1<<16 - 1
)

// Len returns the number of members.
func (t *Table) Len() int { return len(t.recs) }

// Size returns the size of member i.
func (t *Table) Size(i int) int64 { return t.recs[i].size }

// Sum returns the BLAKE3 digest of member i, and false when its digest is
// not a well-formed blake3:<64 lower-case hex> (CheckMembers reports it).
func (t *Table) Sum(i int) (b3.Sum, bool) {
	r := &t.recs[i]
	return r.sum, r.flags&flagDigest == 0
}

// Path returns the path of member i.
func (t *Table) Path(i int) string {
	c := t.cursor(i)
	return c.str()
}

// ID returns the id of member i.
func (t *Table) ID(i int) string {
	c := t.cursor(i)
	p := c.str()
	if t.recs[i].flags&flagID != 0 {
		return c.str()
	}
	return p
}

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

// NewTable returns the Table of ms, in the same order. It does not check
// ms: CheckMembers does, and EncodeMembers refuses what cannot be encoded.
func NewTable(ms []Member) *Table {
	b := newBuilder(make([]rec, len(ms)), 0, newInterner())
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
	t := &Table{recs: b.recs, arenas: []string{string(b.arena)}, strs: b.strs.strs, sorted: true, idsArePaths: b.idsArePaths}
	for i := 1; i < len(ms); i++ {
		if ms[i-1].Path > ms[i].Path {
			t.sorted = false
			break
		}
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
	r := &t.recs[i]
	c := t.cursor(i)
	f := r.flags
	d := decoded{size: r.size, sum: r.sum}
	d.path = c.str()
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
		d.split = t.strs[r.split]
	}
	if d.hasS3 = f&flagS3 != 0; !d.hasS3 {
		return d
	}
	if f&flagBucketRaw != 0 {
		d.bucket = c.str()
	} else {
		d.bucket = t.strs[r.bucket]
	}
	if d.keyIsRaw = f&flagKeyRaw != 0; d.keyIsRaw {
		d.keyRaw = c.str()
	} else {
		d.keyPrefix = t.strs[r.keyPrefix]
	}
	d.versionID = c.str()
	d.hasETag, d.etagMD5 = f&flagETag != 0, f&flagETagMD5 != 0
	switch {
	case d.etagMD5:
		d.etag = c.raw(16)
	case d.hasETag:
		d.etag = c.str()
	}
	return d
}

// cursor reads the strings of one member from its arena.
type cursor struct{ s string }

func (t *Table) cursor(i int) cursor {
	off := t.recs[i].off
	return cursor{t.arenas[off>>arenaShift][off&arenaMask:]}
}

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

// fields are one member's fields as bytes: from a member table line (the
// line's bytes, or decoded escapes) or from a Member.
type fields struct {
	id, path, split, digest, cas []byte
	bucket, key, versionID, etag []byte
	size                         int64
	hasCAS, hasS3                bool
}

// builder appends members to a Table under construction.
type builder struct {
	recs        []rec // recs[n] is the next member's
	n           int
	arena       []byte
	chunk       uint64
	strs        *interner
	local       map[string]uint16 // strs indexes already looked up
	idsArePaths bool
}

func newBuilder(recs []rec, chunk int, strs *interner) *builder {
	return &builder{recs: recs, chunk: uint64(chunk), strs: strs, local: map[string]uint16{}, idsArePaths: true}
}

// intern returns the index of s in the interned strings, adding it when
// there is room. Builders that parse chunks of one table in parallel
// share the interner; each keeps the indexes it has seen, so that the
// interner's lock is taken once per distinct string and builder.
func (b *builder) intern(s []byte) (uint16, bool) {
	if len(s) == 0 {
		return 0, true
	}
	if k, ok := b.local[string(s)]; ok {
		return k, true
	}
	k, ok := b.strs.intern(s)
	if ok {
		b.local[string(s)] = k
	}
	return k, ok
}

// interner holds the interned strings of a Table under construction.
type interner struct {
	mu    sync.Mutex
	strs  []string // strs[0] == ""
	index map[string]uint16
}

func newInterner() *interner {
	return &interner{strs: []string{""}, index: map[string]uint16{"": 0}}
}

// intern returns the index of s, adding it when fewer than maxStrs
// strings are interned.
func (in *interner) intern(s []byte) (uint16, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if k, ok := in.index[string(s)]; ok {
		return k, true
	}
	if len(in.strs) > maxStrs {
		return 0, false
	}
	k := uint16(len(in.strs))
	str := string(s)
	in.strs = append(in.strs, str)
	in.index[str] = k
	return k, true
}

func (b *builder) str(s []byte) {
	b.arena = binary.AppendUvarint(b.arena, uint64(len(s)))
	b.arena = append(b.arena, s...)
}

// add appends f as the next member.
func (b *builder) add(f *fields) {
	r := &b.recs[b.n]
	b.n++
	*r = rec{size: f.size, off: b.chunk<<arenaShift | uint64(len(b.arena))}
	b.str(f.path)
	if !bytes.Equal(f.id, f.path) {
		r.flags |= flagID
		b.idsArePaths = false
		b.str(f.id)
	}
	if !parseSum(&r.sum, f.digest) {
		r.sum = b3.Sum{}
		r.flags |= flagDigest
		b.str(f.digest)
	}
	if f.hasCAS {
		r.flags |= flagCAS
		if !bytes.Equal(f.cas, f.digest) {
			r.flags |= flagCASRaw
			b.str(f.cas)
		}
	}
	var ok bool
	if r.split, ok = b.intern(f.split); !ok {
		r.flags |= flagSplitRaw
		b.str(f.split)
	}
	if !f.hasS3 {
		return
	}
	r.flags |= flagS3
	if r.bucket, ok = b.intern(f.bucket); !ok {
		r.flags |= flagBucketRaw
		b.str(f.bucket)
	}
	ok = false
	if prefix, found := bytes.CutSuffix(f.key, f.path); found {
		r.keyPrefix, ok = b.intern(prefix)
	}
	if !ok {
		r.flags |= flagKeyRaw
		b.str(f.key)
	}
	b.str(f.versionID)
	var md5 [16]byte
	switch {
	case isMD5ETag(f.etag, &md5):
		r.flags |= flagETag | flagETagMD5
		b.arena = append(b.arena, md5[:]...)
	case len(f.etag) > 0:
		r.flags |= flagETag
		b.str(f.etag)
	}
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
