package fs

import (
	"context"
	"sync/atomic"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/verify"
)

// dir is a directory: the root or one implied by member paths. Its
// children come from the index.
type dir struct {
	node
	d    int32      // directory index in the tree's index; 0 for the root
	info verify.Dir // directory d, read once
	// listed is set by an opendir: the kernel may hold a listing of the
	// directory (FOPEN_CACHE_DIR) that carries no file entries.
	listed atomic.Bool
}

var (
	_ = (gofs.NodeGetattrer)((*dir)(nil))
	_ = (gofs.NodeLookuper)((*dir)(nil))
	_ = (gofs.NodeReaddirer)((*dir)(nil))
	_ = (gofs.NodeOpendirHandler)((*dir)(nil))
	_ = (gofs.NodeAccesser)((*dir)(nil))
	_ = (gofs.NodeStatfser)((*dir)(nil))
)

// fill sets the attributes of the directory.
func (d *dir) fill(a *fuse.Attr) {
	d.setCommon(a)
	a.Mode = syscall.S_IFDIR | 0o555
	a.Nlink = 2 + uint32(d.info.Subdirs)
}

// Getattr returns the directory's attributes with the attribute timeout.
func (d *dir) Getattr(ctx context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fill(&out.Attr)
	out.SetTimeout(d.t.opts.AttrTimeout)
	return 0
}

// filler is a node that can describe itself.
type filler interface{ fill(a *fuse.Attr) }

// Lookup returns the child called name with its attributes and the
// entry and attribute timeouts, or ENOENT. The kernel calls it for a
// name it has no entry for; a file looked up this way tells READDIRPLUS
// that files are being used (see dirHandle.Lookup).
func (d *dir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ch, e := d.lookup(ctx, name, out)
	if e == 0 && !ch.IsDir() {
		d.t.fileLookedUp()
	}
	return ch, e
}

// lookup is Lookup without the note for READDIRPLUS.
func (d *dir) lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	k, ok := d.t.idx.lookup(&d.info, name)
	if !ok {
		return nil, syscall.ENOENT
	}
	ch := d.t.newNode(ctx, &d.Inode, k)
	ch.Operations().(filler).fill(&out.Attr)
	out.SetEntryTimeout(d.t.opts.EntryTimeout)
	out.SetAttrTimeout(d.t.opts.AttrTimeout)
	return ch, 0
}

// entries returns ".", ".." and the children sorted by name in byte
// order, each with its inode number and mode (see entry).
func (d *dir) entries() []fuse.DirEntry {
	es := make([]fuse.DirEntry, d.count())
	for j := range es {
		es[j] = d.entry(j)
	}
	return es
}

// count is the number of entries of the listing: the children, "." and "..".
func (d *dir) count() int { return int(d.info.N) + 2 }

// entry returns entry j of the listing: "." and ".." first, then the
// children in byte order of their names. Its offset is j+1, so that a
// seek to offset j resumes at entry j. It is computed from the index on
// demand: a listing of 10,000 files keeps no slice of 10,000 entries
// (a find over ten million files would allocate 400 MB of them).
func (d *dir) entry(j int) fuse.DirEntry {
	x := d.t.idx
	e := fuse.DirEntry{Off: uint64(j) + 1, Mode: syscall.S_IFDIR}
	switch j {
	case 0:
		e.Name, e.Ino = ".", x.dirIno(d.d)
	case 1:
		e.Name, e.Ino = "..", x.dirIno(d.info.Parent) // the root is its own parent
	default:
		k := x.ms.Child(&d.info, j-2)
		e.Name, e.Ino = x.name(k), ino(k)
		if _, _, isDir := x.node(k); !isDir {
			e.Mode = syscall.S_IFREG
		}
	}
	return e
}

// Readdir lists the directory as entries does.
func (d *dir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	return gofs.NewListDirStream(d.entries()), 0
}

// OpendirHandle opens the directory for listing with FOPEN_CACHE_DIR: the
// listing never changes, so the kernel may keep it. It replaces go-fuse's
// default handle, which would call Readdir; the listing is the same.
func (d *dir) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	d.listed.Store(true)
	return &dirHandle{d: d}, fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, 0
}

// Access refuses write access with EROFS and allows reading and searching.
func (d *dir) Access(ctx context.Context, mask uint32) syscall.Errno {
	if mask&unix.W_OK != 0 {
		return syscall.EROFS
	}
	return 0
}

// dirHandle is an open directory. go-fuse serializes the calls on one
// handle. Entries are made one at a time from the index (dir.entry), so
// an opendir that the kernel answers from its cache costs nothing.
type dirHandle struct {
	d   *dir
	pos int           // next entry
	cur fuse.DirEntry // the entry Readdirent returned last
}

var (
	_ = (gofs.FileReaddirenter)((*dirHandle)(nil))
	_ = (gofs.FileSeekdirer)((*dirHandle)(nil))
	_ = (gofs.FileReleasedirer)((*dirHandle)(nil))
	_ = (gofs.FileLookuper)((*dirHandle)(nil))
)

// Readdirent returns the next entry, or nil at the end. The entry is
// valid until the next call: go-fuse copies it before asking again, so
// one entry per handle is reused instead of one allocated per entry.
func (h *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if h.pos >= h.d.count() {
		return nil, 0
	}
	h.cur = h.d.entry(h.pos)
	h.pos++
	return &h.cur, 0
}

// Seekdir continues the listing after the entry with offset off.
func (h *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off > uint64(h.d.count()) {
		return syscall.EINVAL
	}
	h.pos = int(off)
	return 0
}

// Lookup answers READDIRPLUS for the entry Readdirent returned last.
// For a directory it is Lookup: the kernel gets the entry and its
// attributes, as listing and then descending needs. For a file it does
// so only while the kernel looks files up (a LOOKUP of a file in the
// last few seconds: ls -l, du, find -size, stat after listing; or an
// ACL query of a directory, see dir.Getxattr);
// otherwise it gives the kernel no entry (node id 0, which Linux reads
// as "only the name and type", see fuse_direntplus_link), and the kernel
// looks the file up when it is used. A plain listing of a large tree
// (find -type f, a data loader's glob) thus makes no kernel inode and no
// go-fuse inode per file, which would cost the daemon ~420 bytes each
// for as long as the kernel keeps it.
func (h *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if h.pos > 0 {
		e := &h.cur
		if e.Name == name && (e.Mode&syscall.S_IFMT == syscall.S_IFDIR || h.d.t.filesInUse()) {
			return h.d.lookup(ctx, name, out)
		}
	}
	return nil, syscall.ENOENT // go-fuse sends the entry with node id 0
}

// Releasedir does nothing: the handle holds no resources.
func (h *dirHandle) Releasedir(ctx context.Context, flags uint32) {}
