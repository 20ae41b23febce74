package fs

import (
	"context"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/pinfs/pinfs/verify"
)

// Reader serves verified member bytes; i is the member's index in
// snapshot.Table(). ReadAt fills p from offset off of member i and
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

// Backer is an optional interface of Reader, for FUSE passthrough: Backing
// returns a file that holds exactly member i's bytes, verified, opened
// read-only, for the kernel to read from directly (reads of such an open
// never reach the daemon), or ok false when there is none (the open is
// served through ReadAt). The caller closes the file. PassedThrough is
// called once for every open the kernel serves from a backing file, in
// place of Opener's Opened: the member counts as opened and read in full.
// Recheck reports whether f, a backing file of member i handed over
// earlier and still open, still holds member i's verified bytes (a new
// open of an inode shares the backing file of the opens still live).
type Backer interface {
	Backing(ctx context.Context, i int) (f *os.File, ok bool)
	Recheck(ctx context.Context, i int, f *os.File) bool
	PassedThrough(i int)
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
	// Status, when set, answers getxattr of XattrStatus on the root with
	// the mount's live status (pinfs status MOUNTPOINT reads it). The
	// attribute is not listed, so getfattr -d shows only the manifest.
	Status func() []byte
	// Consumed, when set, answers getxattr on the root of XattrConsumed and
	// of the attributes named XattrConsumed+"."+anything: the value, or
	// false for no such attribute (ENODATA). They are not listed either.
	Consumed func(attr string) ([]byte, bool)
	// Passthrough, when set and the Reader is a Backer, lets opens be
	// served from backing files once it is switched on (Probe), and
	// counts them. Nil serves every open through the Reader.
	Passthrough *Passthrough
}

// DefaultTimeout is the entry and attribute timeout when Options leave it zero.
const DefaultTimeout = 24 * time.Hour

// blockSize is st_blksize of files: the 64 KiB verification block.
const blockSize = 64 << 10

// tree is what every node of one mount shares. It is immutable after
// NewRoot and safe for concurrent use.
type tree struct {
	snap *verify.Snapshot
	ms   *verify.Table // snap.Table()
	idx  *index
	r    Reader
	opts Options
	log  *slog.Logger

	// start and lastFileLookup (time since start of the kernel's last
	// LOOKUP of a file, 0 for none) decide whether READDIRPLUS gives
	// entries for files.
	start          time.Time
	lastFileLookup atomic.Int64
}

// filesInUseFor is how long after the kernel's last LOOKUP of a file
// READDIRPLUS keeps giving entries for files.
const filesInUseFor = 2 * time.Second

// fileLookedUp notes a LOOKUP of a file by the kernel.
func (t *tree) fileLookedUp() { t.lastFileLookup.Store(int64(time.Since(t.start))) }

// filesInUse reports whether the kernel looked a file up recently.
func (t *tree) filesInUse() bool {
	last := t.lastFileLookup.Load()
	return last != 0 && time.Since(t.start)-time.Duration(last) < filesInUseFor
}

// NewRoot returns the root node of the snapshot's tree. It indexes the
// tree (directories, children by name, inode numbers); go-fuse inodes
// are made as the kernel looks nodes up.
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
	ms := snap.Table()
	t := &tree{snap: snap, ms: ms, idx: newIndex(ms), r: r, opts: o, log: log, start: time.Now()}
	return &rootDir{dir: dir{node: node{t: t}, info: t.idx.dir(0)}}
}

// rootDir is the root directory (directory 0 of the index). It carries
// the manifest digest as an extended attribute.
type rootDir struct {
	dir
}

// newNode returns a new inode for node k of the index, a child of parent.
// go-fuse keeps one inode per inode number: when the kernel already knows
// node k, the bridge uses the existing one.
func (t *tree) newNode(ctx context.Context, parent *gofs.Inode, k int32) *gofs.Inode {
	i, d, isDir := t.idx.node(k)
	if isDir {
		return parent.NewInode(ctx, &dir{node: node{t: t}, d: d, info: t.idx.dir(d)}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: ino(k)})
	}
	return parent.NewInode(ctx, &file{node: node{t: t}, i: i}, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: ino(k)})
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
	out.Files, out.Ffree = n.t.idx.nodes(), 0
	out.NameLen = verify.MaxNameLen
	return 0
}
