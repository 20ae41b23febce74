package verify

import (
	"bytes"
	"fmt"
	"sync"
	"unsafe"

	"github.com/pinfs/pinfs/verify/b3"
)

// fields are one member's fields as bytes: from a member table line (the
// line's bytes, or decoded escapes) or from a Member.
type fields struct {
	id, path, split, digest, cas []byte
	bucket, key, versionID, etag []byte
	size                         int64
	hasCAS, hasS3                bool
}

// part is a run of consecutive members encoded on their own: sections
// secWalk to secDetails, whose offsets count from the part's start, and
// what the member checks found.
type part struct {
	n           int
	b           [secDetails + 1][]byte
	idsArePaths bool
	problems    []indexed // member problems; i counts from the part's first member
}

// builder encodes members into a part.
type builder struct {
	part
	strs  *interner
	local map[string]uint16 // strs indexes already looked up
	check bool              // run the member checks as members are added
}

func newBuilder(strs *interner) *builder {
	return &builder{part: part{idsArePaths: true}, strs: strs, local: map[string]uint16{}}
}

// reserve makes room for members members of about bytes of table.
func (b *builder) reserve(members, bytes int) {
	b.b[secWalk] = make([]byte, 0, members*walkSize)
	b.b[secOpen] = make([]byte, 0, members*openSize)
	b.b[secNames] = make([]byte, 0, bytes/4)
	b.b[secDetails] = make([]byte, 0, bytes/4)
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

// str appends s to the part's detail strings.
func (b *builder) str(s []byte) {
	d := &b.b[secDetails]
	*d = appendUvarint(*d, uint64(len(s)))
	*d = append(*d, s...)
}

func appendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// add appends f as the next member.
func (b *builder) add(f *fields) {
	w := &b.b
	w[secWalk] = le.AppendUint64(le.AppendUint64(w[secWalk], uint64(f.size)), uint64(len(w[secNames])))
	w[secNames] = append(w[secNames], f.path...)
	detOff := uint64(len(w[secDetails]))
	var sum b3.Sum
	var flags, split, bucket, keyPrefix uint16
	if !bytes.Equal(f.id, f.path) {
		flags |= flagID
		b.idsArePaths = false
		b.str(f.id)
	}
	if !parseSum(&sum, f.digest) {
		sum = b3.Sum{}
		flags |= flagDigest
		b.str(f.digest)
	}
	if f.hasCAS {
		flags |= flagCAS
		if !bytes.Equal(f.cas, f.digest) {
			flags |= flagCASRaw
			b.str(f.cas)
		}
	}
	var ok bool
	if split, ok = b.intern(f.split); !ok {
		flags |= flagSplitRaw
		b.str(f.split)
	}
	if f.hasS3 {
		flags |= flagS3
		if bucket, ok = b.intern(f.bucket); !ok {
			flags |= flagBucketRaw
			b.str(f.bucket)
		}
		ok = false
		if prefix, found := bytes.CutSuffix(f.key, f.path); found {
			keyPrefix, ok = b.intern(prefix)
		}
		if !ok {
			flags |= flagKeyRaw
			b.str(f.key)
		}
		b.str(f.versionID)
		var md5 [16]byte
		switch {
		case isMD5ETag(f.etag, &md5):
			flags |= flagETag | flagETagMD5
			w[secDetails] = append(w[secDetails], md5[:]...)
		case len(f.etag) > 0:
			flags |= flagETag
			b.str(f.etag)
		}
	}
	o := append(w[secOpen], sum[:]...)
	o = le.AppendUint64(o, detOff)
	for _, v := range [...]uint16{flags, split, bucket, keyPrefix} {
		o = le.AppendUint16(o, v)
	}
	w[secOpen] = o
	if b.check {
		b.checkMember(f, flags&flagDigest != 0, &sum)
	}
	b.n++
}

// checkMember adds the problems of f's digest and source (memberProblems).
func (b *builder) checkMember(f *fields, digestRaw bool, sum *b3.Sum) {
	s := func(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
	d := decoded{
		size: f.size, sum: *sum, path: s(f.path), id: s(f.id), split: s(f.split),
		digest: s(f.digest), digestRaw: digestRaw, hasCAS: f.hasCAS, hasS3: f.hasS3,
		cas: s(f.cas), casRaw: f.hasCAS && !bytes.Equal(f.cas, f.digest),
		bucket: s(f.bucket), keyRaw: s(f.key), keyIsRaw: true, versionID: s(f.versionID),
	}
	for _, p := range memberProblems(&d) {
		// The strings alias the line, which is reused: keep copies.
		p.Path, p.ID = string(f.path), string(f.id)
		b.problems = append(b.problems, indexed{b.n, p})
	}
}

// sink receives the sections of a Table as they are built.
type sink interface {
	// write appends b to section s.
	write(s sec, b []byte) error
	// view returns what was written to s so far, for reading.
	view(s sec) ([]byte, error)
	// finish completes the sections and returns their layout.
	finish(h *header) (*layout, error)
}

// memSink keeps the sections in memory.
type memSink struct{ b [nsec][]byte }

// newMemSink returns a memSink with room for about members members of a
// table of bytes bytes; the sections grow beyond it as needed.
func newMemSink(members, bytes int64) *memSink {
	m := &memSink{}
	m.b[secWalk] = make([]byte, 0, members*walkSize)
	m.b[secOpen] = make([]byte, 0, members*openSize)
	m.b[secNames] = make([]byte, 0, bytes/8)
	m.b[secDetails] = make([]byte, 0, bytes/8)
	return m
}

func (m *memSink) write(s sec, b []byte) error {
	m.b[s] = append(m.b[s], b...)
	return nil
}

func (m *memSink) view(s sec) ([]byte, error) { return m.b[s], nil }

func (m *memSink) finish(*header) (*layout, error) { return &layout{b: m.b}, nil }

// assembler joins the parts of a table in order into a sink: it moves
// their offsets to the table's, builds the tree and runs the checks that
// span members.
type assembler struct {
	s                 sink
	n                 int
	bytes             int64
	names, details    uint64 // bytes of secNames and secDetails so far
	sorted, checked   bool
	idsArePaths       bool
	tree              treeBuilder
	paths             pathChecker
	pathProbs, member []indexed
	emptyIDs          []int
	err               error
}

func newAssembler(s sink, sorted bool) *assembler {
	return &assembler{s: s, sorted: sorted, idsArePaths: true, tree: newTreeBuilder()}
}

// part appends the members of p.
func (a *assembler) part(p *part) {
	if a.err != nil {
		return
	}
	w, o, names := p.b[secWalk], p.b[secOpen], p.b[secNames]
	for k := range p.n {
		r := w[k*walkSize:]
		start := le.Uint64(r[8:])
		end := uint64(len(names))
		if k+1 < p.n {
			end = le.Uint64(r[walkSize+8:])
		}
		a.bytes += int64(le.Uint64(r))
		le.PutUint64(r[8:], start+a.names)
		oo := o[k*openSize+32:]
		le.PutUint64(oo, le.Uint64(oo)+a.details)
		i := a.n + k
		path := names[start:end]
		if a.sorted {
			a.tree.add(int32(i), path, a.names+start)
		}
		if a.checked {
			if detail, bad := a.paths.next(unsafe.String(unsafe.SliceData(path), len(path))); bad {
				a.pathProbs = append(a.pathProbs, indexed{i, Problem{Kind: KindUnsafePath, Path: string(path), ID: string(path), Detail: detail}})
			}
			if len(path) == 0 {
				a.emptyIDs = append(a.emptyIDs, i)
			}
		}
	}
	for _, q := range p.problems {
		a.member = append(a.member, indexed{a.n + q.i, q.p})
	}
	a.idsArePaths = a.idsArePaths && p.idsArePaths
	a.n += p.n
	a.names += uint64(len(names))
	a.details += uint64(len(p.b[secDetails]))
	for s := secWalk; s <= secDetails; s++ {
		if err := a.s.write(s, p.b[s]); err != nil {
			a.err = err
			return
		}
	}
}

// finish writes the interned strings and the tree and returns the Table,
// with the problems of a checked table (nil otherwise).
func (a *assembler) finish(strs []string, h *header) (*Table, []Problem, error) {
	if a.err != nil {
		return nil, nil, a.err
	}
	var sb []byte
	for _, s := range strs[1:] {
		sb = append(appendUvarint(sb, uint64(len(s))), s...)
	}
	if err := a.s.write(secStrs, sb); err != nil {
		return nil, nil, err
	}
	dirs := 0
	if a.sorted {
		view := &layout{}
		for _, s := range []sec{secWalk, secNames} {
			b, err := a.s.view(s)
			if err != nil {
				return nil, nil, err
			}
			view.b[s] = b
		}
		of, kids, drs := a.tree.finish(view)
		dirs = len(drs)
		for _, s := range []struct {
			s sec
			b []byte
		}{{secOf, of}, {secKids, kids}, {secDirs, drs.bytes()}} {
			if err := a.s.write(s.s, s.b); err != nil {
				return nil, nil, err
			}
		}
	}
	if h != nil {
		h.members, h.bytes, h.dirs = int64(a.n), a.bytes, int64(dirs)
		h.sorted, h.idsArePaths = a.sorted, a.idsArePaths
	}
	l, err := a.s.finish(h)
	if err != nil {
		return nil, nil, err
	}
	l.strs = strs
	t := &Table{n: a.n, sorted: a.sorted, idsArePaths: a.idsArePaths, dirs: dirs}
	t.cur.Store(l)
	if !a.checked {
		return t, nil, nil
	}
	return t, a.problems(t), nil
}

// problems merges the problems found as members were added, in the order
// Check gives them: by member, its path's, its id's, then its own.
func (a *assembler) problems(t *Table) []Problem {
	var ids []indexed
	if a.idsArePaths {
		for _, i := range a.emptyIDs {
			ids = append(ids, indexed{i, Problem{Kind: KindBadMember, Detail: "empty id"}})
		}
	} else {
		t.checkIDs(func(i int, kind, format string, args ...any) {
			ids = append(ids, indexed{i, Problem{Kind: kind, Detail: fmt.Sprintf(format, args...)}})
		})
		sortIndexed(ids)
	}
	for k := range ids {
		ids[k].p.Path, ids[k].p.ID = t.Path(ids[k].i), t.ID(ids[k].i)
	}
	if !a.idsArePaths {
		// part named a path problem by its path: which ids differ from
		// their paths is known only once every part is in.
		for k := range a.pathProbs {
			a.pathProbs[k].p.ID = t.ID(a.pathProbs[k].i)
		}
	}
	lists := [][]indexed{a.pathProbs, ids, a.member}
	var ps []Problem
	for {
		next := -1
		for _, l := range lists {
			if len(l) > 0 && (next < 0 || l[0].i < next) {
				next = l[0].i
			}
		}
		if next < 0 {
			return ps
		}
		for k := range lists {
			for len(lists[k]) > 0 && lists[k][0].i == next {
				ps = append(ps, lists[k][0].p)
				lists[k] = lists[k][1:]
			}
		}
	}
}
