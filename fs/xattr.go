package fs

import (
	"context"
	"iter"
	"strings"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// Extended attribute names. Values are the exact strings of the member
// table and manifest.
const (
	XattrDigest    = "user.pinfs.digest"     // blake3:<hex> of the file's bytes
	XattrID        = "user.pinfs.id"         // the member's sample id
	XattrSource    = "user.pinfs.source"     // s3://bucket/key or cas:blake3:<hex>
	XattrSplit     = "user.pinfs.split"      // absent when the member has none
	XattrVersionID = "user.pinfs.version_id" // pinned S3 version; absent for CAS members
	XattrManifest  = "user.pinfs.manifest"   // on the root: the snapshot's manifest digest
	XattrStatus    = "user.pinfs.status"     // on the root, not listed: the mount's live status (JSON), when Options.Status is set
	// XattrConsumed, on the root and not listed, and the attributes whose
	// names begin with it and a ".", are the mount's consumed set so far,
	// when Options.Consumed is set (pinfs run show asks a live mount).
	XattrConsumed = "user.pinfs.consumed"
)

var (
	_ = (gofs.NodeGetxattrer)((*dir)(nil))
	_ = (gofs.NodeGetxattrer)((*file)(nil))
	_ = (gofs.NodeListxattrer)((*file)(nil))
	_ = (gofs.NodeGetxattrer)((*rootDir)(nil))
	_ = (gofs.NodeListxattrer)((*rootDir)(nil))
)

// xattrs yields the file's attributes in name order.
func (f *file) xattrs() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		m := f.member()
		_ = yield(XattrDigest, m.Digest) &&
			yield(XattrID, m.ID) &&
			yield(XattrSource, m.Source()) &&
			(m.Split == "" || yield(XattrSplit, m.Split)) &&
			(m.VersionID() == "" || yield(XattrVersionID, m.VersionID()))
	}
}

// unsupported reports whether attr is outside the user namespace, the
// only one pinfs has: no ACLs (system.posix_acl_*), no security labels
// (security.selinux, security.capability), no trusted.*. Such a name is
// ENOTSUP, not ENODATA, on every node: ls -l asks for security.selinux
// and system.posix_acl_access of every file it lists, a FUSE round trip
// each (the kernel caches no xattrs), and takes ENOTSUP as "this file
// system has none" and stops asking for the rest of the device
// (coreutils' file_has_aclinfo_cache), where ENODATA would have it ask
// again for each of 10,000 files.
func unsupported(attr string) bool { return !strings.HasPrefix(attr, "user.") }

// Getxattr returns ENOTSUP for an attribute outside the user namespace
// and ENODATA for any other: a directory carries no attributes. A query
// of an ACL or label of a directory tells READDIRPLUS that files are
// being used, as a LOOKUP of a file does (see dirHandle.Lookup): ls -l
// asks it of the directory it is about to list, and then stats every
// file (as cp -a, rsync -A and tar --acls do), so the listing's entries
// spare the kernel a LOOKUP per file of the first chunk (ls stats each
// entry as it reads, which has the kernel ask the next chunks with
// READDIRPLUS too, while files are in use). A
// listing the kernel already holds (a find went through) has no file
// entries and would cost ls a LOOKUP per file, so the query also drops
// it from the kernel's cache (FUSE_NOTIFY_INVAL_INODE; the tree never
// changes, so the listing read again is the same) and ls reads it anew,
// with entries.
func (d *dir) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if unsupported(attr) {
		d.t.fileLookedUp()
		if d.listed.Swap(false) {
			d.NotifyContent(0, 0) // ENOSYS when not mounted: nothing to drop
		}
		return 0, syscall.ENOTSUP
	}
	return 0, syscall.ENODATA
}

// Getxattr returns the value of attr (see getxattr).
func (f *file) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return getxattr(f.xattrs(), attr, dest)
}

// Listxattr lists the file's attribute names (see listxattr).
func (f *file) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return listxattr(f.xattrs(), dest)
}

// xattrs yields the root's only attribute.
func (r *rootDir) xattrs() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		yield(XattrManifest, r.t.snap.Digest().String())
	}
}

// Getxattr returns the value of attr (see getxattr).
func (r *rootDir) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if unsupported(attr) {
		return r.dir.Getxattr(ctx, attr, dest)
	}
	if attr == XattrStatus && r.t.opts.Status != nil {
		return fit(dest, string(r.t.opts.Status()))
	}
	if c := r.t.opts.Consumed; c != nil && (attr == XattrConsumed || strings.HasPrefix(attr, XattrConsumed+".")) {
		v, ok := c(attr)
		if !ok {
			return 0, syscall.ENODATA
		}
		return fit(dest, string(v))
	}
	return getxattr(r.xattrs(), attr, dest)
}

// Listxattr lists the root's attribute names (see listxattr).
func (r *rootDir) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return listxattr(r.xattrs(), dest)
}

// getxattr copies the value of attr into dest following getxattr(2):
// an empty dest asks for the size, a too small one gets ERANGE with the
// size, a missing attribute is ENODATA and one outside the user
// namespace ENOTSUP (see unsupported).
func getxattr(attrs iter.Seq2[string, string], attr string, dest []byte) (uint32, syscall.Errno) {
	if unsupported(attr) {
		return 0, syscall.ENOTSUP
	}
	for name, v := range attrs {
		if name == attr {
			return fit(dest, v)
		}
	}
	return 0, syscall.ENODATA
}

// listxattr copies the NUL-terminated attribute names into dest following
// listxattr(2): an empty dest asks for the size, a too small one gets
// ERANGE with the size.
func listxattr(attrs iter.Seq2[string, string], dest []byte) (uint32, syscall.Errno) {
	var list []byte
	for name := range attrs {
		list = append(list, name...)
		list = append(list, 0)
	}
	return fit(dest, string(list))
}

// fit copies v into dest when it fits, and reports v's length.
func fit(dest []byte, v string) (uint32, syscall.Errno) {
	switch {
	case len(dest) == 0:
		return uint32(len(v)), 0
	case len(dest) < len(v):
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}
