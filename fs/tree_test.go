package fs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/pinfs/pinfs/verify"
)

// build makes the tree of snap without mounting it and returns the root.
func build(t testing.TB, snap *verify.Snapshot, r Reader, o Options) *rootDir {
	t.Helper()
	root := NewRoot(snap, r, o)
	gofs.NewNodeFS(root, &gofs.Options{}) // connects the root to a bridge
	return root.(*rootDir)
}

// nodes lists every directory under root with Readdir and looks up each
// name with Lookup, as the kernel does, and returns the nodes by path
// ("" for the root).
func nodes(root *gofs.Inode) map[string]*gofs.Inode {
	ctx := context.Background()
	all := map[string]*gofs.Inode{"": root}
	var walk func(prefix string, n *gofs.Inode)
	walk = func(prefix string, n *gofs.Inode) {
		ds, e := n.Operations().(gofs.NodeReaddirer).Readdir(ctx)
		if e != 0 {
			panic(e)
		}
		for ds.HasNext() {
			de, _ := ds.Next()
			if de.Name == "." || de.Name == ".." {
				continue
			}
			ch, e := n.Operations().(gofs.NodeLookuper).Lookup(ctx, de.Name, &fuse.EntryOut{})
			if e != 0 {
				panic(fmt.Sprintf("Lookup(%q) in %q: %v", de.Name, prefix, e))
			}
			p := prefix + de.Name
			all[p] = ch
			if ch.IsDir() {
				walk(p+"/", ch)
			}
		}
	}
	walk("", root)
	return all
}

// wantInos is the inode numbering of fixture: depth-first, children in
// byte order of their names. It pins the numbering across versions.
var wantInos = map[string]uint64{
	"": 1, "README.txt": 2, "Z.txt": 3, "a": 4, "a/x.bin": 5, "a/y": 6,
	"a/y/z.bin": 7, "a-b": 8, "a-b/c": 9, "a.b": 10, "train": 11,
	"train/part-000.jsonl": 12, "train/part-001.jsonl": 13, "val": 14,
	"val/part-000.jsonl": 15, "ü.txt": 16,
}

func TestInodeNumbers(t *testing.T) {
	snap, data := snapshot(t, fixture)
	root := build(t, snap, &memReader{data: data}, testOptions())
	got := map[string]uint64{}
	for p, n := range nodes(root.EmbeddedInode()) {
		got[p] = inoOf(n)
	}
	if fmt.Sprint(got) != fmt.Sprint(wantInos) {
		t.Errorf("inode numbers:\n got %v\nwant %v", got, wantInos)
	}
	if root.t.idx.nodes() != uint64(len(wantInos)) {
		t.Errorf("node count %d, want %d", root.t.idx.nodes(), len(wantInos))
	}
}

// dfsInos numbers the tree of paths the way the package documentation
// says, by walking a nested map: an independent statement of the rule.
func dfsInos(paths []string) map[string]uint64 {
	type tnode map[string]tnode
	top := tnode{}
	for _, p := range paths {
		n := top
		for c := range strings.SplitSeq(p, "/") {
			if n[c] == nil {
				n[c] = tnode{}
			}
			n = n[c]
		}
	}
	inos := map[string]uint64{"": 1}
	next := uint64(2)
	var walk func(prefix string, n tnode)
	walk = func(prefix string, n tnode) {
		names := make([]string, 0, len(n))
		for name := range n {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			inos[prefix+name] = next
			next++
			walk(prefix+name+"/", n[name])
		}
	}
	walk("", top)
	return inos
}

func TestInodeNumbersRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	comps := []string{"a", "b", "a.b", "a-b", "a b", "A", "é", "a0", "ab", "_"}
	for round := range 50 {
		seen := map[string]bool{}
		var specs []spec
		var paths []string
	member:
		for range 1 + rng.IntN(40) {
			var cs []string
			for range 1 + rng.IntN(4) {
				cs = append(cs, comps[rng.IntN(len(comps))])
			}
			p := strings.Join(cs, "/")
			// Skip paths that are taken, or that would make a file a directory.
			for q := range seen {
				if q == p || strings.HasPrefix(q, p+"/") || strings.HasPrefix(p, q+"/") {
					continue member
				}
			}
			seen[p] = true
			specs = append(specs, spec{path: p, size: int64(rng.IntN(3))})
			paths = append(paths, p)
		}
		snap, data := snapshot(t, specs)
		root := build(t, snap, &memReader{data: data}, testOptions())
		got := map[string]uint64{}
		for p, n := range nodes(root.EmbeddedInode()) {
			got[p] = inoOf(n)
		}
		if want := dfsInos(paths); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d, paths %q:\n got %v\nwant %v", round, paths, got, want)
		}
	}
}

func TestGetattr(t *testing.T) {
	snap, data := snapshot(t, fixture)
	o := testOptions()
	o.AttrTimeout = 5 * time.Hour
	root := build(t, snap, &memReader{data: data}, o)
	all := nodes(root.EmbeddedInode())
	sizes := map[string]int64{}
	for _, m := range snap.Members() {
		sizes[m.Path] = m.Size
	}
	wantNlink := map[string]uint32{"": 6, "a": 3, "a/y": 2, "a-b": 2, "train": 2, "val": 2}
	for p, n := range all {
		var out fuse.AttrOut
		if e := n.Operations().(gofs.NodeGetattrer).Getattr(context.Background(), nil, &out); e != 0 {
			t.Fatalf("%q: Getattr: %v", p, e)
		}
		a := out.Attr
		mode, nlink, size := uint32(syscall.S_IFREG|0o444), uint32(1), uint64(sizes[p])
		if n.IsDir() {
			mode, nlink, size = syscall.S_IFDIR|0o555, wantNlink[p], 0
		}
		if a.Mode != mode || a.Nlink != nlink || a.Size != size || a.Ino != wantInos[p] {
			t.Errorf("%q: mode %o nlink %d size %d ino %d, want %o %d %d %d", p, a.Mode, a.Nlink, a.Size, a.Ino, mode, nlink, size, wantInos[p])
		}
		if a.Uid != testUID || a.Gid != testGID {
			t.Errorf("%q: owner %d:%d", p, a.Uid, a.Gid)
		}
		for _, ts := range [][2]uint64{{a.Atime, uint64(a.Atimensec)}, {a.Mtime, uint64(a.Mtimensec)}, {a.Ctime, uint64(a.Ctimensec)}} {
			if !time.Unix(int64(ts[0]), int64(ts[1])).Equal(mtime) {
				t.Errorf("%q: times %v, want %v", p, a, mtime)
			}
		}
		if out.Timeout() != 5*time.Hour {
			t.Errorf("%q: attr timeout %v", p, out.Timeout())
		}
	}
}

func TestLookup(t *testing.T) {
	snap, data := snapshot(t, fixture)
	root := build(t, snap, &memReader{data: data}, testOptions())
	a := nodes(root.EmbeddedInode())["a"].Operations().(*dir)
	var out fuse.EntryOut
	ch, e := a.Lookup(context.Background(), "y", &out)
	if e != 0 || ch.StableAttr().Ino != wantInos["a/y"] {
		t.Fatalf("Lookup(y) = %v, %v", ch, e)
	}
	if out.Attr.Mode != syscall.S_IFDIR|0o555 || out.Attr.Ino != wantInos["a/y"] {
		t.Errorf("Lookup(y) attr %v", out.Attr)
	}
	if out.EntryTimeout() != DefaultTimeout || out.AttrTimeout() != DefaultTimeout {
		t.Errorf("Lookup timeouts %v %v, want %v", out.EntryTimeout(), out.AttrTimeout(), DefaultTimeout)
	}
	out = fuse.EntryOut{}
	if _, e := root.Lookup(context.Background(), "README.txt", &out); e != 0 || out.Attr.Size != 11 || out.Attr.Mode != syscall.S_IFREG|0o444 {
		t.Errorf("Lookup(README.txt) = %v, attr %v", e, out.Attr)
	}
	for _, name := range []string{"nope", "x.bin", "A", "a/x.bin"} {
		if _, e := root.Lookup(context.Background(), name, &fuse.EntryOut{}); e != syscall.ENOENT {
			t.Errorf("Lookup(%q) = %v, want ENOENT", name, e)
		}
	}
}

func TestReaddir(t *testing.T) {
	snap, data := snapshot(t, fixture)
	root := build(t, snap, &memReader{data: data}, testOptions())
	ds, e := root.Readdir(context.Background())
	if e != 0 {
		t.Fatal(e)
	}
	var got []string
	for ds.HasNext() {
		de, e := ds.Next()
		if e != 0 {
			t.Fatal(e)
		}
		got = append(got, fmt.Sprintf("%s:%d:%o", de.Name, de.Ino, de.Mode&syscall.S_IFMT))
	}
	want := []string{".:1:40000", "..:1:40000", "README.txt:2:100000", "Z.txt:3:100000", "a:4:40000",
		"a-b:8:40000", "a.b:10:100000", "train:11:40000", "val:14:40000", "ü.txt:16:100000"}
	if !slices.Equal(got, want) {
		t.Errorf("root listing\n got %q\nwant %q", got, want)
	}

	// Through the handle the kernel uses: offsets resume after an entry.
	y := nodes(root.EmbeddedInode())["a/y"].Operations().(*dir)
	fh, flags, e := y.OpendirHandle(context.Background(), 0)
	if e != 0 || flags&fuse.FOPEN_CACHE_DIR == 0 {
		t.Fatalf("OpendirHandle = %v, %#x", e, flags)
	}
	h := fh.(*dirHandle)
	var names []string
	for {
		de, e := h.Readdirent(context.Background())
		if e != 0 {
			t.Fatal(e)
		}
		if de == nil {
			break
		}
		names = append(names, fmt.Sprintf("%s:%d@%d", de.Name, de.Ino, de.Off))
	}
	if want := []string{".:6@1", "..:4@2", "z.bin:7@3"}; !slices.Equal(names, want) {
		t.Errorf("a/y listing %q, want %q", names, want)
	}
	if e := h.Seekdir(context.Background(), 2); e != 0 {
		t.Fatal(e)
	}
	if de, _ := h.Readdirent(context.Background()); de == nil || de.Name != "z.bin" {
		t.Errorf("after Seekdir(2): %v, want z.bin", de)
	}
	if e := h.Seekdir(context.Background(), 4); e != syscall.EINVAL {
		t.Errorf("Seekdir past the end = %v, want EINVAL", e)
	}

}

// TestReaddirPlus: READDIRPLUS gives entries for directories, and for
// files only within filesInUseFor of the kernel's last LOOKUP of a file.
func TestReaddirPlus(t *testing.T) {
	snap, data := snapshot(t, fixture)
	root := build(t, snap, &memReader{data: data}, testOptions())
	ctx := context.Background()
	check := func(when string, files bool) {
		t.Helper()
		fh, _, _ := root.OpendirHandle(ctx, 0)
		h := fh.(*dirHandle)
		for {
			de, _ := h.Readdirent(ctx)
			if de == nil {
				break
			}
			if de.Name == "." || de.Name == ".." {
				continue
			}
			var out fuse.EntryOut
			ch, e := h.Lookup(ctx, de.Name, &out)
			if de.Mode&syscall.S_IFMT == syscall.S_IFDIR || files {
				if e != 0 || ch.StableAttr().Ino != de.Ino || out.Attr.Ino != de.Ino || out.Attr.Mode&syscall.S_IFMT != de.Mode&syscall.S_IFMT {
					t.Errorf("%s: READDIRPLUS lookup of %q = %v, %v, attr %v", when, de.Name, ch, e, out.Attr)
				}
			} else if e == 0 || ch != nil {
				t.Errorf("%s: READDIRPLUS lookup of file %q = %v, %v; want no entry", when, de.Name, ch, e)
			}
		}
	}
	check("fresh tree", false)
	if _, e := root.Lookup(ctx, "a", &fuse.EntryOut{}); e != 0 {
		t.Fatal(e)
	}
	check("after a LOOKUP of a directory", false)
	if _, e := root.Lookup(ctx, "Z.txt", &fuse.EntryOut{}); e != 0 {
		t.Fatal(e)
	}
	check("after a LOOKUP of a file", true)
	root.t.start = root.t.start.Add(-filesInUseFor)
	check("a while after", false)
}

func TestStatfs(t *testing.T) {
	snap, data := snapshot(t, fixture)
	root := build(t, snap, &memReader{data: data}, testOptions())
	var total uint64
	for _, m := range snap.Members() {
		total += uint64(m.Size)
	}
	for _, n := range []gofs.InodeEmbedder{root, nodes(root.EmbeddedInode())["a.b"].Operations()} {
		var out fuse.StatfsOut
		if e := n.(gofs.NodeStatfser).Statfs(context.Background(), &out); e != 0 {
			t.Fatal(e)
		}
		if out.Blocks != (total+4095)/4096 || out.Bsize != 4096 || out.Bfree != 0 || out.Bavail != 0 ||
			out.Files != uint64(len(wantInos)) || out.Ffree != 0 || out.NameLen != 255 {
			t.Errorf("Statfs = %+v (total %d bytes)", out, total)
		}
	}
}
