package fs

import (
	"github.com/pinfs/pinfs/verify"
)

// index reads the tree of a snapshot from its Table (see verify.Dir):
// every node by its number, and the children of every directory sorted
// by name. Node k (counting from 0 in depth-first pre-order) has inode
// k+2; the root is inode 1 and not a node. Lookup and Readdir read it;
// the go-fuse inodes are made only for what the kernel asks for. It holds
// nothing of its own: a Table mapped from an index file keeps the tree
// there, so that a node nobody looks at costs no memory.
type index struct {
	ms *verify.Table
}

func newIndex(ms *verify.Table) *index { return &index{ms: ms} }

// nodes returns the number of nodes, the root included.
func (x *index) nodes() uint64 { return uint64(x.ms.Nodes()) + 1 }

// ino returns the inode number of node k.
func ino(k int32) uint64 { return rootIno + 1 + uint64(k) }

// dir returns directory d.
func (x *index) dir(d int32) verify.Dir { return x.ms.Dir(d) }

// dirIno returns the inode number of directory d.
func (x *index) dirIno(d int32) uint64 {
	if d == 0 {
		return rootIno
	}
	return ino(x.ms.Dir(d).Node)
}

// node returns what node k is: member i, or directory d when isDir.
func (x *index) node(k int32) (i int, d int32, isDir bool) { return x.ms.Node(k) }

// name returns the name of node k.
func (x *index) name(k int32) string { return x.ms.NodeName(k) }

// lookup returns the node called name in directory dd.
func (x *index) lookup(dd *verify.Dir, name string) (int32, bool) { return x.ms.Lookup(dd, name) }
