package fs

import (
	"context"
	"strings"
	"syscall"
	"testing"

	gofs "github.com/hanwen/go-fuse/v2/fs"
)

type xattrNode interface {
	gofs.NodeGetxattrer
	gofs.NodeListxattrer
}

// xattrsOf reads every attribute of n through the size-probe protocol.
func xattrsOf(t testing.TB, n xattrNode) map[string]string {
	t.Helper()
	ctx := context.Background()
	size, e := n.Listxattr(ctx, nil)
	if e != 0 {
		t.Fatalf("Listxattr(nil) = %v", e)
	}
	list := make([]byte, size)
	if got, e := n.Listxattr(ctx, list); e != 0 || got != size {
		t.Fatalf("Listxattr = %d, %v; want %d", got, e, size)
	}
	all := map[string]string{}
	for _, name := range strings.Split(strings.TrimSuffix(string(list), "\x00"), "\x00") {
		size, e := n.Getxattr(ctx, name, nil)
		if e != 0 {
			t.Fatalf("Getxattr(%s, nil) = %v", name, e)
		}
		v := make([]byte, size)
		if got, e := n.Getxattr(ctx, name, v); e != 0 || got != size {
			t.Fatalf("Getxattr(%s) = %d, %v; want %d", name, got, e, size)
		}
		all[name] = string(v)
	}
	return all
}

func TestXattrs(t *testing.T) {
	snap, data := snapshot(t, fixture)
	root := build(t, snap, &memReader{data: data}, testOptions())
	ms := snap.Members()

	s3 := fileOf(t, root, "train/part-000.jsonl")
	m := ms[s3.i]
	want := map[string]string{
		XattrDigest: m.Digest, XattrID: "id:train/part-000.jsonl", XattrSource: "s3://bucket/data/train/part-000.jsonl",
		XattrSplit: "train", XattrVersionID: "v.train/part-000.jsonl",
	}
	if got := xattrsOf(t, s3); !equalMaps(got, want) {
		t.Errorf("S3 member xattrs\n got %q\nwant %q", got, want)
	}

	cas := fileOf(t, root, "README.txt")
	m = ms[cas.i]
	want = map[string]string{XattrDigest: m.Digest, XattrID: "id:README.txt", XattrSource: "cas:" + m.Digest}
	if got := xattrsOf(t, cas); !equalMaps(got, want) {
		t.Errorf("CAS member without split xattrs\n got %q\nwant %q", got, want)
	}

	want = map[string]string{XattrManifest: snap.Digest().String()}
	if got := xattrsOf(t, root); !equalMaps(got, want) {
		t.Errorf("root xattrs\n got %q\nwant %q", got, want)
	}

	ctx := context.Background()
	for _, c := range []struct {
		n    gofs.NodeGetxattrer
		name string
	}{{cas, XattrSplit}, {cas, XattrVersionID}, {s3, "user.other"}, {s3, XattrManifest}, {root, XattrDigest}} {
		if _, e := c.n.Getxattr(ctx, c.name, make([]byte, 100)); e != syscall.ENODATA {
			t.Errorf("Getxattr(%s) = %v, want ENODATA", c.name, e)
		}
	}
	d := nodes(root.EmbeddedInode())["train"].Operations().(*dir)
	for _, n := range []gofs.NodeGetxattrer{cas, s3, root, d} {
		for _, name := range []string{"security.selinux", "system.posix_acl_access", "trusted.pinfs.digest", "pinfs.digest"} {
			if _, e := n.Getxattr(ctx, name, make([]byte, 100)); e != syscall.ENOTSUP {
				t.Errorf("Getxattr(%s) = %v, want ENOTSUP", name, e)
			}
		}
	}
	if _, e := d.Getxattr(ctx, XattrDigest, make([]byte, 100)); e != syscall.ENODATA {
		t.Errorf("directory Getxattr(%s) = %v, want ENODATA", XattrDigest, e)
	}
	if n, e := s3.Getxattr(ctx, XattrDigest, make([]byte, 10)); e != syscall.ERANGE || n != uint32(len(ms[s3.i].Digest)) {
		t.Errorf("Getxattr into a small buffer = %d, %v; want %d, ERANGE", n, e, len(ms[s3.i].Digest))
	}
	if _, e := s3.Listxattr(ctx, make([]byte, 5)); e != syscall.ERANGE {
		t.Errorf("Listxattr into a small buffer = %v, want ERANGE", e)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestRootConsumedXattrs: with Options.Consumed the root answers
// XattrConsumed and the names under it, unlisted; without, ENODATA.
func TestRootConsumedXattrs(t *testing.T) {
	snap, data := snapshot(t, fixture)
	opts := testOptions()
	var asked []string
	opts.Consumed = func(attr string) ([]byte, bool) {
		asked = append(asked, attr)
		if attr == XattrConsumed+".gone" {
			return nil, false
		}
		return []byte("v:" + attr), true
	}
	root := build(t, snap, &memReader{data: data}, opts)
	ctx := context.Background()
	for _, name := range []string{XattrConsumed, XattrConsumed + ".7.0"} {
		buf := make([]byte, 100)
		n, e := root.Getxattr(ctx, name, buf)
		if e != 0 || string(buf[:n]) != "v:"+name {
			t.Errorf("Getxattr(%s) = %q, %v", name, buf[:n], e)
		}
	}
	for _, name := range []string{XattrConsumed + ".gone", XattrConsumed + "x", "user.pinfs.consumedx.1"} {
		if _, e := root.Getxattr(ctx, name, make([]byte, 100)); e != syscall.ENODATA {
			t.Errorf("Getxattr(%s) = %v, want ENODATA", name, e)
		}
	}
	if want := []string{XattrConsumed, XattrConsumed + ".7.0", XattrConsumed + ".gone"}; strings.Join(asked, ",") != strings.Join(want, ",") {
		t.Errorf("Consumed asked for %q, want %q", asked, want)
	}
	if got := xattrsOf(t, root); len(got) != 1 {
		t.Errorf("root lists %q, want only the manifest", got)
	}
	plain := build(t, snap, &memReader{data: data}, testOptions())
	if _, e := plain.Getxattr(ctx, XattrConsumed, make([]byte, 100)); e != syscall.ENODATA {
		t.Errorf("without Options.Consumed: Getxattr = %v, want ENODATA", e)
	}
}
