// Package fs serves a verified snapshot as a read-only FUSE file system.
//
// NewRoot builds the tree of a [verify.Snapshot]: one regular file per
// member at its path, and the directories its paths imply. Mount mounts
// it. Member bytes come from a [Reader], which must hand out only
// verified bytes; this package never sees a store or a cache.
//
//	root := fs.NewRoot(snap, reader, fs.Options{UID: uid, GID: gid, Mtime: time.Unix(0, 0)})
//	server, err := fs.Mount(dir, root, fs.MountOptions{Name: snap.Digest().String()})
//	...
//	server.Unmount()
//
// A root serves one mount: call NewRoot again for every mount, even of the
// same snapshot.
//
// # The tree
//
// Files are 0444 and directories 0555, all owned by Options.UID and
// Options.GID. Sizes are the members' exact sizes. Every node's mtime,
// ctime and atime is Options.Mtime, so nothing depends on the wall clock.
// The tree never changes. The Snapshot's Table holds it (verify.Dir: the
// directories, each one's children sorted by name, the inode numbers),
// mapped from the cache dir's index or built in memory; Lookup and
// Readdir answer from it, and a go-fuse inode is made
// only for a node the kernel looks up (go-fuse drops it again when the
// kernel forgets it). A file node holds only its member index; everything
// else is read from the Snapshot's Table.
//
// # Inode numbers
//
// Inode numbers and readdir order are functions of the member table only,
// so they are identical across remounts, processes and hosts. The root is
// inode 1. All other nodes, files and implied directories alike, are
// numbered from 2 in depth-first pre-order, visiting the children of each
// directory in byte order of their names. Equivalently: sort all paths
// comparing them component by component in byte order (a directory before
// its contents); the k-th path, counting from 0, has inode k+2.
//
// Readdir lists "." and "..", then the children in byte order of their
// names, each with its inode number and type.
//
// # Kernel caching
//
// The content and the tree are immutable, so the kernel may cache all of
// it. Open returns FOPEN_KEEP_CACHE (the page cache survives close and
// reopen) and FOPEN_NOFLUSH (close sends no FLUSH), except for a
// passthrough open (below). Read replies with the
// Reader's verified slices as they are (fuse.ReadResultVector, written
// with writev) when the Reader is a SliceReader; the mount disables
// splice, which never applies to in-memory replies. Opendir returns FOPEN_CACHE_DIR, so listings are cached too.
// Lookup and Getattr carry long entry and attribute timeouts
// (Options.EntryTimeout, Options.AttrTimeout, 24 hours by default), and
// Mount also caches failed lookups for the entry timeout.
//
// The mount takes READDIRPLUS_AUTO: the kernel asks READDIRPLUS for the
// first chunk of a listing and after a LOOKUP in the directory, and plain
// READDIR otherwise, so a walk that looks nothing up (find) gets names
// and types only, at a quarter of the bytes per entry. Listings are made
// one entry at a time from the index and allocate nothing per entry.
//
// READDIRPLUS answers carry the entry and attributes of subdirectories,
// and of files only while the kernel is looking files up (within two
// seconds of a LOOKUP of a file: ls -l, du, find -size, a stat after
// listing; or of a query of a directory's ACL or security label, which
// ls -l makes of the directory it lists, and which also drops a listing
// the kernel holds from an earlier walk, so that ls -l reads it again with
// entries rather than looking up each file). Otherwise files are listed
// with their name, inode number and type, and the kernel looks a file up
// when it is first used. Listing a
// tree of a million files (find -type f, a data loader's glob)
// therefore makes neither kernel inodes nor go-fuse inodes for them: each
// would cost the daemon about 420 bytes for as long as the kernel keeps
// it.
//
// # Passthrough
//
// With Options.Passthrough set and a Reader that is a [Backer], an open may
// be served by the kernel from a backing file, a verified file of exactly
// the member's bytes (FUSE passthrough, Linux 6.9+): the open's reads,
// splice and mmap never reach the daemon, and the Backer's PassedThrough
// is told in place of Opener's Opened. [Passthrough] starts off, since a
// mount serves before [Passthrough.Probe] (which registers a file with the
// kernel once, after mounting) has said whether the kernel takes backing
// files; until it is on, and once it is off, Backing is never asked.
//
// The kernel fails with EIO an open in one mode (cached or passthrough) of
// an inode that has opens live in the other, so each file node counts its
// live opens: an open joins the mode of those live, and only an open with
// none live asks Backing. Passthrough opens of a node share one backing
// file, rechecked for each new open, and closed a second after the last
// of them (go-fuse lets go of the inode's backing id only after Release,
// and gives it to an open in between: that open must be handed the same
// file); the kernel holds its own reference, so closing or removing it
// never breaks an open. A passthrough open does
// not set FOPEN_KEEP_CACHE: its page cache is the backing file's. A READ
// of a passthrough open shows that go-fuse failed to register its file
// (and so turned backing files off for the mount): the switch goes off
// too, logged once. Without
// Options.Passthrough, open handles nothing and counts nothing, as before.
//
// # Read-only
//
// Mount mounts with ro, nodev and nosuid, so the kernel refuses most
// writes itself. Every node also refuses them: open for writing or with
// O_TRUNC, create, mkdir, mknod, unlink, rmdir, rename, link, symlink,
// O_TMPFILE, setattr (chmod, chown, truncate, utimes), setxattr,
// removexattr, write, fallocate and copy_file_range all fail with EROFS,
// so the file system is correct without the mount flag too. (go-fuse's
// defaults would not be: a node without Unlink or Rmdir reports success
// and drops the child from its tree.)
//
// # Extended attributes
//
// Every file carries user.pinfs.digest (blake3:<hex>), user.pinfs.id,
// user.pinfs.source (s3://bucket/key or cas:blake3:<hex>),
// user.pinfs.split (when the member has one) and user.pinfs.version_id
// (S3 members only). The root carries user.pinfs.manifest, the snapshot's
// digest. getfattr -d shows them. Names outside the user namespace
// (system.posix_acl_*, security.*, trusted.*) are ENOTSUP on every node,
// so that ls -l, told the file system has no ACLs or labels, stops asking
// for them of every file (two round trips each).
//
// # Errors and interrupts
//
// One function, Errno, turns every read-path error into an errno and logs
// it once with its cause: a canceled context is EINTR, store.ErrAccessDenied
// is EACCES, and everything else (a verification mismatch, a pinned version
// that is gone, I/O) is EIO. A member that exists is never ENOENT. Read
// passes the request's context to the Reader; the kernel cancels it when
// the reading process is interrupted, and the read then fails with EINTR.
//
// # Deadlocks
//
// Code that accesses a mount served by the same process (tests) must do so
// from an ordinary goroutine with ordinary system calls, never from inside
// a FUSE callback, and should not start subprocesses while it holds files
// of the mount open (see go-fuse's package documentation).
package fs
