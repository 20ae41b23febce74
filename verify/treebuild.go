package verify

import (
	"bytes"
	"slices"
	"strings"
)

// treeBuilder builds the tree of a table's paths as they come in byte
// order. In byte order all paths under a directory are contiguous, so a
// stack of open directories finds every directory and its children in
// order of first appearance. Children stay in that order unless a name
// holds a byte that sorts before '/' (then finish sorts them); numbering
// depth-first gives the nodes, whose inode numbers follow.
type treeBuilder struct {
	dirs     []dirRec  // dirs[0] is the root
	kids     [][]int32 // children as they appear: member i as i, directory d as ^d
	unsorted []int32   // directories whose children came out of name order
	stack    []openDir
	prefix   []byte // the deepest open directory's path and "/"
}

type openDir struct {
	d      int32
	plen   int    // length of its path and "/" in prefix; 0 for the root
	last   []byte // the name of its last child
	sorted bool
}

func newTreeBuilder() treeBuilder {
	return treeBuilder{dirs: []dirRec{{node: -1}}, kids: [][]int32{nil}, stack: []openDir{{sorted: true}}}
}

// add adds member i with path p, which starts at offset off of secNames.
func (tb *treeBuilder) add(i int32, p []byte, off uint64) {
	for len(tb.stack) > 1 && !bytes.HasPrefix(p, tb.prefix[:tb.stack[len(tb.stack)-1].plen]) {
		tb.pop()
	}
	for {
		top := &tb.stack[len(tb.stack)-1]
		rest := p[top.plen:]
		j := bytes.IndexByte(rest, '/')
		if j < 0 {
			tb.child(top, int32(i), rest)
			return
		}
		d := int32(len(tb.dirs))
		tb.dirs = append(tb.dirs, dirRec{nameOff: off + uint64(top.plen), nameLen: uint32(j), parent: top.d})
		tb.kids = append(tb.kids, nil)
		tb.dirs[top.d].nsub++
		tb.child(top, ^d, rest[:j])
		plen := top.plen + j + 1
		tb.prefix = append(tb.prefix[:top.plen], rest[:j+1]...)
		tb.stack = append(tb.stack, openDir{d: d, plen: plen, sorted: true})
	}
}

// child adds c, called name, to the open directory top.
func (tb *treeBuilder) child(top *openDir, c int32, name []byte) {
	if len(tb.kids[top.d]) > 0 && bytes.Compare(top.last, name) > 0 {
		top.sorted = false
	}
	top.last = append(top.last[:0], name...)
	tb.kids[top.d] = append(tb.kids[top.d], c)
}

func (tb *treeBuilder) pop() {
	if top := tb.stack[len(tb.stack)-1]; !top.sorted {
		tb.unsorted = append(tb.unsorted, top.d)
	}
	tb.stack = tb.stack[:len(tb.stack)-1]
}

// dirRecs are the directories of a tree.
type dirRecs []dirRec

func (ds dirRecs) bytes() []byte {
	b := make([]byte, 0, len(ds)*dirSize)
	for k := range ds {
		b = appendDir(b, &ds[k])
	}
	return b
}

// finish sorts what came out of order, using the paths in v, and numbers
// the nodes depth-first (a directory's subtree follows it): node k has
// inode k+2. It returns sections secOf and secKids, and the directories.
func (tb *treeBuilder) finish(v *layout) (of, kids []byte, dirs dirRecs) {
	for len(tb.stack) > 0 {
		tb.pop()
	}
	name := func(c int32) string {
		if c < 0 {
			r := &tb.dirs[^c]
			return v.str(secNames, r.nameOff, r.nameOff+uint64(r.nameLen))
		}
		p, _ := v.path(int(c))
		return p[strings.LastIndexByte(p, '/')+1:]
	}
	for _, d := range tb.unsorted {
		slices.SortFunc(tb.kids[d], func(a, b int32) int { return strings.Compare(name(a), name(b)) })
	}
	n := int32(0)
	for d, ks := range tb.kids {
		tb.dirs[d].first, tb.dirs[d].n = n, int32(len(ks))
		n += int32(len(ks))
	}
	ofs := make([]byte, 4*n)
	kid := make([]byte, 4*n)
	next := int32(0)
	type frame struct{ d, j int32 }
	walk := []frame{{0, 0}}
	for len(walk) > 0 {
		f := &walk[len(walk)-1]
		if f.j == int32(len(tb.kids[f.d])) {
			tb.kids[f.d] = nil // done with: its memory goes back as the walk goes on
			walk = walk[:len(walk)-1]
			continue
		}
		c := tb.kids[f.d][f.j]
		le.PutUint32(kid[4*(tb.dirs[f.d].first+f.j):], uint32(next))
		le.PutUint32(ofs[4*next:], uint32(c))
		f.j++
		if c < 0 {
			tb.dirs[^c].node = next
			walk = append(walk, frame{^c, 0})
		}
		next++
	}
	return ofs, kid, tb.dirs
}
