package verify

import (
	"sort"
	"strings"
)

// The tree of a sorted Table: its directories and files as nodes, numbered
// depth-first with each directory's children in byte order of their names,
// so that the numbering and the listing order are the same for every build
// of one table (a remount gives the same inodes). Node k is either member
// Node(k) or a directory; directory 0 is the root, which is not a node.

// Dir is a directory of a Table's tree.
type Dir struct {
	Name    string // the last component of its path; "" for the root
	Node    int32  // its node number; -1 for the root
	Parent  int32  // the directory it is in; the root is its own
	Subdirs int32  // how many of its children are directories
	N       int32  // how many children it has
	first   int32
}

// Dirs returns the number of directories, the root included; 0 for a
// table that is not sorted, which has no tree.
func (t *Table) Dirs() int { return t.dirs }

// Nodes returns the number of nodes: members and directories but the root.
func (t *Table) Nodes() int {
	if t.dirs == 0 {
		return 0
	}
	return len(t.layout().b[secOf]) / 4
}

// Dir returns directory d.
func (t *Table) Dir(d int32) Dir {
	for l := t.layout(); ; l = t.damaged(l) {
		r, ok := l.dir(int(d))
		if !ok {
			continue
		}
		name, ok := l.dirName(&r)
		if ok {
			return Dir{Name: name, Node: r.node, Parent: r.parent, Subdirs: r.nsub, N: r.n, first: r.first}
		}
	}
}

// Child returns the node number of child j of directory d, in name order.
func (t *Table) Child(d *Dir, j int) int32 {
	for l := t.layout(); ; l = t.damaged(l) {
		if k, ok := l.int32At(secKids, int(d.first)+j); ok {
			return k
		}
	}
}

// Node returns what node k is: member i, or directory d when dir.
func (t *Table) Node(k int32) (i int, d int32, dir bool) {
	for l := t.layout(); ; l = t.damaged(l) {
		if c, ok := l.int32At(secOf, int(k)); ok {
			if c < 0 {
				return 0, ^c, true
			}
			return int(c), 0, false
		}
	}
}

// NodeName returns the name of node k: the last component of its path.
func (t *Table) NodeName(k int32) string {
	i, d, dir := t.Node(k)
	if dir {
		return t.Dir(d).Name
	}
	p := t.Path(i)
	return p[strings.LastIndexByte(p, '/')+1:]
}

// Lookup returns the node called name in directory d.
func (t *Table) Lookup(d *Dir, name string) (int32, bool) {
	j := sort.Search(int(d.N), func(j int) bool { return t.NodeName(t.Child(d, j)) >= name })
	if j == int(d.N) {
		return 0, false
	}
	k := t.Child(d, j)
	return k, t.NodeName(k) == name
}
