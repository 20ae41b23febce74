package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Every operation that would change the tree or a file fails with EROFS.
// The ro mount flag makes the kernel refuse most of them before they
// arrive; these make the file system correct without it, and replace
// go-fuse defaults that are wrong for a read-only tree (Unlink and Rmdir
// default to success, the rest to ENOTSUP or ENOATTR).

var (
	_ = (gofs.NodeSetattrer)((*node)(nil))
	_ = (gofs.NodeSetxattrer)((*node)(nil))
	_ = (gofs.NodeRemovexattrer)((*node)(nil))

	_ = (gofs.NodeCreater)((*dir)(nil))
	_ = (gofs.NodeTmpfiler)((*dir)(nil))
	_ = (gofs.NodeMkdirer)((*dir)(nil))
	_ = (gofs.NodeMknoder)((*dir)(nil))
	_ = (gofs.NodeUnlinker)((*dir)(nil))
	_ = (gofs.NodeRmdirer)((*dir)(nil))
	_ = (gofs.NodeRenamer)((*dir)(nil))
	_ = (gofs.NodeLinker)((*dir)(nil))
	_ = (gofs.NodeSymlinker)((*dir)(nil))

	_ = (gofs.NodeWriter)((*file)(nil))
	_ = (gofs.NodeWritever)((*file)(nil))
	_ = (gofs.NodeAllocater)((*file)(nil))
	_ = (gofs.NodeCopyFileRanger)((*file)(nil))
)

// Setattr (chmod, chown, truncate, utimes) fails with EROFS.
func (n *node) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

// Setxattr fails with EROFS.
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return syscall.EROFS
}

// Removexattr fails with EROFS.
func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return syscall.EROFS
}

// Create fails with EROFS.
func (d *dir) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

// Tmpfile (open with O_TMPFILE) fails with EROFS.
func (d *dir) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

// Mkdir fails with EROFS.
func (d *dir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

// Mknod fails with EROFS.
func (d *dir) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

// Unlink fails with EROFS.
func (d *dir) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

// Rmdir fails with EROFS.
func (d *dir) Rmdir(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

// Rename fails with EROFS.
func (d *dir) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EROFS
}

// Link fails with EROFS.
func (d *dir) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

// Symlink fails with EROFS.
func (d *dir) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

// Write fails with EROFS.
func (f *file) Write(ctx context.Context, fh gofs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	return 0, syscall.EROFS
}

// Writev fails with EROFS. (go-fuse answers a vectored write to a node
// with only Write with ENOSYS.)
func (f *file) Writev(ctx context.Context, fh gofs.FileHandle, data [][]byte, off int64) (uint32, syscall.Errno) {
	return 0, syscall.EROFS
}

// Allocate (fallocate) fails with EROFS.
func (f *file) Allocate(ctx context.Context, fh gofs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	return syscall.EROFS
}

// CopyFileRange fails with EROFS: its destination would be in this file
// system.
func (f *file) CopyFileRange(ctx context.Context, fhIn gofs.FileHandle, offIn uint64, out *gofs.Inode, fhOut gofs.FileHandle, offOut, n uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.EROFS
}
