package fs

import (
	"context"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestMutatorsEROFS calls every mutating operation of both node types.
func TestMutatorsEROFS(t *testing.T) {
	snap, data := snapshot(t, fixture)
	root := build(t, snap, &memReader{data: data}, testOptions())
	ctx := context.Background()
	f := fileOf(t, root, "a.b")
	d := nodes(root.EmbeddedInode())["a"].Operations().(*dir)
	out := &fuse.EntryOut{}
	ops := map[string]func() syscall.Errno{
		"file Setattr":     func() syscall.Errno { return f.Setattr(ctx, nil, &fuse.SetAttrIn{}, &fuse.AttrOut{}) },
		"dir Setattr":      func() syscall.Errno { return d.Setattr(ctx, nil, &fuse.SetAttrIn{}, &fuse.AttrOut{}) },
		"root Setattr":     func() syscall.Errno { return root.Setattr(ctx, nil, &fuse.SetAttrIn{}, &fuse.AttrOut{}) },
		"file Setxattr":    func() syscall.Errno { return f.Setxattr(ctx, "user.x", []byte("v"), 0) },
		"root Setxattr":    func() syscall.Errno { return root.Setxattr(ctx, XattrManifest, []byte("v"), 0) },
		"file Removexattr": func() syscall.Errno { return f.Removexattr(ctx, XattrDigest) },
		"dir Removexattr":  func() syscall.Errno { return d.Removexattr(ctx, "user.x") },
		"Create": func() syscall.Errno {
			_, _, _, e := d.Create(ctx, "new", syscall.O_WRONLY, 0o644, out)
			return e
		},
		"Tmpfile": func() syscall.Errno {
			_, _, _, e := d.Tmpfile(ctx, syscall.O_WRONLY, 0o644, out)
			return e
		},
		"Mkdir":  func() syscall.Errno { _, e := d.Mkdir(ctx, "new", 0o755, out); return e },
		"Mknod":  func() syscall.Errno { _, e := d.Mknod(ctx, "new", syscall.S_IFIFO|0o644, 0, out); return e },
		"Unlink": func() syscall.Errno { return d.Unlink(ctx, "x.bin") },
		"Rmdir":  func() syscall.Errno { return root.Rmdir(ctx, "a") },
		"Rename": func() syscall.Errno { return d.Rename(ctx, "x.bin", root, "moved", 0) },
		"Link":   func() syscall.Errno { _, e := d.Link(ctx, f, "link", out); return e },
		"Symlink": func() syscall.Errno {
			_, e := d.Symlink(ctx, "x.bin", "sym", out)
			return e
		},
		"Write":     func() syscall.Errno { _, e := f.Write(ctx, nil, []byte("x"), 0); return e },
		"Writev":    func() syscall.Errno { _, e := f.Writev(ctx, nil, [][]byte{{'x'}, {'y'}}, 0); return e },
		"Allocate":  func() syscall.Errno { return f.Allocate(ctx, nil, 0, 10, 0) },
		"CopyRange": func() syscall.Errno { _, e := f.CopyFileRange(ctx, nil, 0, &f.Inode, nil, 0, 1, 0); return e },
	}
	for name, op := range ops {
		if e := op(); e != syscall.EROFS {
			t.Errorf("%s = %v, want EROFS", name, e)
		}
	}
	if all := nodes(root.EmbeddedInode()); all["a/x.bin"] == nil || all["a"] == nil || len(all) != len(wantInos) {
		t.Error("the tree changed")
	}
}
