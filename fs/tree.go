package fs

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/pinfs/pinfs/verify"
)

// Reader serves verified member bytes; i is the member's index in
// snapshot.Members(). ReadAt fills p from offset off of member i and
// returns a short count only at the end of the member. It must return
// promptly with ctx's error when ctx is canceled, and be safe for
// concurrent use.
type Reader interface {
	ReadAt(ctx context.Context, i int, p []byte, off int64) (int, error)
}

// Opener is an optional interface of Reader: Opened is called once per
// successful open(2) of member i (the run record counts members opened).
type Opener interface {
	Opened(i int)
}

// Options configure the tree.
type Options struct {
	UID, GID uint32 // owner of every file and directory
	// Mtime is fixed by the manifest: the mtime, ctime and atime of every
	// node. Callers pass a constant such as time.Unix(0, 0).
	Mtime time.Time
	// EntryTimeout and AttrTimeout are how long the kernel may cache
	// lookups and attributes. The tree is immutable, so they are long:
	// DefaultTimeout when zero.
	EntryTimeout, AttrTimeout time.Duration
	// Logger receives every error once, with its cause, from Errno.
	// slog.Default() when nil.
	Logger *slog.Logger
}

// DefaultTimeout is the entry and attribute timeout when Options leave it zero.
const DefaultTimeout = 24 * time.Hour

// blockSize is st_blksize of files: the 64 KiB verification block.
const blockSize = 64 << 10

// tree is what every node of one mount shares. It is immutable after
// NewRoot and safe for concurrent use.
type tree struct {
	snap  *verify.Snapshot
	r     Reader
	opts  Options
	log   *slog.Logger
	nodes uint64 // files and directories, root included; set by OnAdd
}

// NewRoot returns the root node of the snapshot's tree. The tree is built
// when the root is mounted (or passed to go-fuse's NewNodeFS).
func NewRoot(snap *verify.Snapshot, r Reader, o Options) gofs.InodeEmbedder {
	if o.EntryTimeout <= 0 {
		o.EntryTimeout = DefaultTimeout
	}
	if o.AttrTimeout <= 0 {
		o.AttrTimeout = DefaultTimeout
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	t := &tree{snap: snap, r: r, opts: o, log: log}
	return &rootDir{dir: dir{node: node{t: t}}}
}

// rootDir is the root directory. It builds the tree in OnAdd and carries
// the manifest digest as an extended attribute.
type rootDir struct {
	dir
}

var _ = (gofs.NodeOnAdder)((*rootDir)(nil))

// OnAdd builds the whole tree with persistent inodes, numbering the nodes
// as the package documentation describes.
func (r *rootDir) OnAdd(ctx context.Context) {
	t := r.t
	ents := pathsOf(t.snap.Members())
	slices.SortFunc(ents, func(a, b entry) int { return comparePaths(a.path, b.path) })
	t.nodes = uint64(len(ents)) + 1

	// stack[d] is the most recent directory at depth d; in pre-order it is
	// the parent of the next node at depth d+1.
	stack := []*dir{&r.dir}
	for k, e := range ents {
		depth := strings.Count(e.path, "/")
		parent := stack[depth]
		name := e.path[strings.LastIndexByte(e.path, '/')+1:]
		attr := gofs.StableAttr{Ino: rootIno + 1 + uint64(k)}
		var ch *gofs.Inode
		if e.member < 0 {
			d := &dir{node: node{t: t}}
			attr.Mode = syscall.S_IFDIR
			ch = parent.NewPersistentInode(ctx, d, attr)
			parent.nsub++
			stack = append(stack[:depth+1], d)
		} else {
			attr.Mode = syscall.S_IFREG
			ch = parent.NewPersistentInode(ctx, &file{node: node{t: t}, i: e.member}, attr)
		}
		if !parent.AddChild(name, ch, false) {
			// A verified snapshot has unique paths; say so loudly if not.
			t.log.Error("pinfs: duplicate path in snapshot tree", "path", e.path, "snapshot", t.snap.Digest())
		}
	}
}

// entry is a node of the tree before it is built: a member (its index)
// or, with member -1, a directory implied by member paths.
type entry struct {
	path   string
	member int
}

// pathsOf returns an entry for every member and every directory the
// member paths imply. ms is sorted by path in byte order, so all paths
// under a directory "d/" are contiguous: a directory is new exactly when
// the previous member does not share its prefix.
func pathsOf(ms []verify.Member) []entry {
	ents := make([]entry, 0, len(ms)+len(ms)/8+1)
	prev := ""
	for i := range ms {
		p := ms[i].Path
		for j := 0; j < len(p); j++ {
			if p[j] == '/' && !strings.HasPrefix(prev, p[:j+1]) {
				ents = append(ents, entry{path: p[:j], member: -1})
			}
		}
		ents = append(ents, entry{path: p, member: i})
		prev = p
	}
	return ents
}

// comparePaths orders paths component by component in byte order, a
// directory before everything under it: a byte-order comparison in which
// '/' sorts before every other byte (paths contain no NUL).
func comparePaths(a, b string) int {
	n := min(len(a), len(b))
	for k := 0; k < n; k++ {
		ca, cb := a[k], b[k]
		switch {
		case ca == cb:
			continue
		case ca == '/':
			return -1
		case cb == '/':
			return 1
		case ca < cb:
			return -1
		default:
			return 1
		}
	}
	return len(a) - len(b)
}

// node is what files and directories share: the go-fuse inode and the tree.
type node struct {
	gofs.Inode
	t *tree
}

// rootIno is the root's inode number (FUSE_ROOT_ID).
const rootIno = 1

// inoOf returns the inode number of n. go-fuse gives the root the Ino of
// Options.RootStableAttr (Mount sets 1) or else 0; pinfs always says 1.
func inoOf(n *gofs.Inode) uint64 {
	if n.IsRoot() {
		return rootIno
	}
	return n.StableAttr().Ino
}

// setCommon sets the inode number, the owner and the fixed times of a.
func (n *node) setCommon(a *fuse.Attr) {
	a.Ino = inoOf(&n.Inode)
	a.Uid, a.Gid = n.t.opts.UID, n.t.opts.GID
	mt := n.t.opts.Mtime
	sec, nsec := uint64(mt.Unix()), uint32(mt.Nanosecond())
	a.Atime, a.Mtime, a.Ctime = sec, sec, sec
	a.Atimensec, a.Mtimensec, a.Ctimensec = nsec, nsec, nsec
}

// Statfs reports the snapshot's total size as used blocks, nothing free,
// and its node count as used inodes.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	const bsize = 4096
	total := uint64(n.t.snap.Manifest().Members.Bytes)
	out.Bsize, out.Frsize = bsize, bsize
	out.Blocks = (total + bsize - 1) / bsize
	out.Bfree, out.Bavail = 0, 0
	out.Files, out.Ffree = n.t.nodes, 0
	out.NameLen = verify.MaxNameLen
	return 0
}
