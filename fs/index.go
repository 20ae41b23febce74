package fs

import (
	"slices"
	"strings"

	"github.com/pinfs/pinfs/verify"
)

// index is the tree of a snapshot as flat arrays, built once: every node
// by its number, and the children of every directory sorted by name. Node
// k (counting from 0 in depth-first pre-order) has inode k+2; the root is
// inode 1 and not a node. Lookup and Readdir read it; the go-fuse inodes
// are made only for what the kernel asks for.
//
// It costs 8 bytes per node plus a small record per directory, and its
// names are the member paths of the Table.
type index struct {
	ms *verify.Table
	// of[k] is the member of node k, or ^d for directory d.
	of []int32
	// kids[dirs[d].first : dirs[d].first+dirs[d].n] are the children of
	// directory d (node numbers), in byte order of their names.
	kids []int32
	dirs []dirInfo // dirs[0] is the root
}

type dirInfo struct {
	name     string // last path component; "" for the root
	node     int32  // node number; -1 for the root
	parent   int32  // directory index of the parent; the root is its own
	first, n int32
	nsub     uint32 // subdirectories
}

// newIndex builds the index of ms, whose paths are sorted in byte order
// (a verified snapshot's are). In byte order all paths under a directory
// are contiguous, so one pass with a stack of open directories finds every
// directory and its children in order of first appearance; sorting each
// directory's children by name (already in order, unless names contain
// bytes that sort before '/') and numbering depth-first gives the inodes.
func newIndex(ms *verify.Table) *index {
	x := &index{ms: ms, dirs: []dirInfo{{node: -1}}}
	// Children as they appear: a member i as i, a directory d as ^d.
	kids := [][]int32{nil}
	type open struct {
		d      int32
		prefix string // the directory's path and "/"; "" for the root
	}
	stack := []open{{0, ""}}
	for i := range ms.Len() {
		p := ms.Path(i)
		for len(stack) > 1 && !strings.HasPrefix(p, stack[len(stack)-1].prefix) {
			stack = stack[:len(stack)-1]
		}
		top := stack[len(stack)-1]
		for {
			rest := p[len(top.prefix):]
			j := strings.IndexByte(rest, '/')
			if j < 0 {
				break
			}
			d := int32(len(x.dirs))
			x.dirs = append(x.dirs, dirInfo{name: rest[:j], parent: top.d})
			kids = append(kids, nil)
			kids[top.d] = append(kids[top.d], ^d)
			x.dirs[top.d].nsub++
			top = open{d, p[:len(top.prefix)+j+1]}
			stack = append(stack, top)
		}
		kids[top.d] = append(kids[top.d], int32(i))
	}

	name := func(c int32) string {
		if c < 0 {
			return x.dirs[^c].name
		}
		return base(ms.Path(int(c)))
	}
	byName := func(a, b int32) int { return strings.Compare(name(a), name(b)) }
	n := int32(0)
	for d, ks := range kids {
		if !slices.IsSortedFunc(ks, byName) {
			slices.SortFunc(ks, byName)
		}
		x.dirs[d].first, x.dirs[d].n = n, int32(len(ks))
		n += int32(len(ks))
	}

	// Number the nodes depth-first: a directory's subtree follows it.
	x.of = make([]int32, n)
	x.kids = make([]int32, n)
	next := int32(0)
	type frame struct {
		d int32
		j int32 // next child
	}
	walk := []frame{{0, 0}}
	for len(walk) > 0 {
		f := &walk[len(walk)-1]
		if f.j == int32(len(kids[f.d])) {
			walk = walk[:len(walk)-1]
			continue
		}
		c := kids[f.d][f.j]
		x.kids[x.dirs[f.d].first+f.j] = next
		x.of[next] = c
		f.j++
		if c < 0 {
			x.dirs[^c].node = next
			walk = append(walk, frame{^c, 0})
		}
		next++
	}
	return x
}

// base returns the last component of path p.
func base(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// nodes returns the number of nodes, the root included.
func (x *index) nodes() uint64 { return uint64(len(x.of)) + 1 }

// ino returns the inode number of node k.
func ino(k int32) uint64 { return rootIno + 1 + uint64(k) }

// dirIno returns the inode number of directory d.
func (x *index) dirIno(d int32) uint64 {
	if d == 0 {
		return rootIno
	}
	return ino(x.dirs[d].node)
}

// name returns the name of node k.
func (x *index) name(k int32) string {
	if c := x.of[k]; c < 0 {
		return x.dirs[^c].name
	}
	return base(x.ms.Path(int(x.of[k])))
}

// children returns the children of directory d, in byte order of names.
func (x *index) children(d int32) []int32 {
	di := &x.dirs[d]
	return x.kids[di.first : di.first+di.n]
}

// lookup returns the node called name in directory d.
func (x *index) lookup(d int32, name string) (int32, bool) {
	ks := x.children(d)
	j, found := slices.BinarySearchFunc(ks, name, func(k int32, name string) int {
		return strings.Compare(x.name(k), name)
	})
	if !found {
		return 0, false
	}
	return ks[j], true
}
