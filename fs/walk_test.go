package fs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// wideDir is a snapshot of one directory of n empty files, more than one
// chunk of a READDIRPLUS answer.
func wideDir(t testing.TB, n int) []spec {
	t.Helper()
	specs := make([]spec, n)
	for k := range specs {
		specs[k] = spec{path: fmt.Sprintf("d/sample-%06d.jpg", k)}
	}
	return specs
}

// TestReaddirentAllocates nothing: a listing is made from the index one
// entry at a time, so a walk over millions of files leaves no garbage per
// entry (no slice of the whole listing, no entry copied to the heap).
// Not parallel: AllocsPerRun refuses to run in a parallel test.
func TestReaddirentAllocates(t *testing.T) {
	snap, data := snapshot(t, wideDir(t, 500))
	root := build(t, snap, &memReader{data: data}, testOptions())
	d := nodes(root.EmbeddedInode())["d"].Operations().(*dir)
	ctx := context.Background()
	n := 0
	allocs := testing.AllocsPerRun(3, func() {
		fh, _, _ := d.OpendirHandle(ctx, 0)
		h := fh.(*dirHandle)
		n = 0
		for de, _ := h.Readdirent(ctx); de != nil; de, _ = h.Readdirent(ctx) {
			n++
		}
	})
	if n != 502 {
		t.Fatalf("listed %d entries, want 502", n)
	}
	// One for the handle itself.
	if allocs > 1 {
		t.Errorf("listing 502 entries allocates %v times, want at most 1 (the handle)", allocs)
	}
}

// TestMountedWalkReaddir: a walk that looks nothing up is answered with
// plain READDIR after the first chunk (READDIRPLUS_AUTO): a quarter of
// the bytes per entry of READDIRPLUS, whose entries a walk does not use.
func TestMountedWalkReaddir(t *testing.T) {
	t.Parallel()
	snap, data := snapshot(t, wideDir(t, 2000))
	o := testOptions()
	var logs lockedBuffer
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	dir, unmount := mount(t, NewRoot(snap, &memReader{data: data}, o), MountOptions{Debug: true})
	es, err := os.ReadDir(filepath.Join(dir, "d"))
	if err != nil || len(es) != 2000 {
		t.Fatalf("readdir: %d entries, %v", len(es), err)
	}
	unmount()
	ops := map[string]int{}
	for _, m := range regexp.MustCompile(`rx \d+: ([A-Z]+) `).FindAllStringSubmatch(logs.String(), -1) {
		ops[m[1]]++
	}
	if ops["READDIR"] == 0 || ops["READDIRPLUS"] > 1 {
		t.Errorf("requests for a listing of 2000 files: %v; want READDIR after the first READDIRPLUS of each directory", ops)
	}
}

// TestReaddirPlusAfterACLQuery: ls -l asks for the ACL and label of the
// directory it lists; READDIRPLUS then gives entries for files, which
// ls stats every one of.
func TestReaddirPlusAfterACLQuery(t *testing.T) {
	t.Parallel()
	snap, data := snapshot(t, fixture)
	root := build(t, snap, &memReader{data: data}, testOptions())
	ctx := context.Background()
	d := nodes(root.EmbeddedInode())["train"].Operations().(*dir)
	entries := func() (n int) {
		fh, _, _ := d.OpendirHandle(ctx, 0)
		h := fh.(*dirHandle)
		for de, _ := h.Readdirent(ctx); de != nil; de, _ = h.Readdirent(ctx) {
			if ch, e := h.Lookup(ctx, de.Name, &fuse.EntryOut{}); e == 0 && ch != nil {
				n++
			}
		}
		return n
	}
	root.t.start = root.t.start.Add(-filesInUseFor) // nodes looked the files up
	if n := entries(); n != 0 {
		t.Fatalf("no LOOKUP lately: %d file entries, want 0", n)
	}
	if _, e := d.Getxattr(ctx, XattrDigest, nil); e != syscall.ENODATA {
		t.Fatalf("Getxattr(%s) = %v", XattrDigest, e)
	}
	if n := entries(); n != 0 {
		t.Errorf("after a query of a user.* attribute: %d file entries, want 0", n)
	}
	for _, n := range []gofs.NodeGetxattrer{d, root} {
		root.t.start = root.t.start.Add(-filesInUseFor)
		if _, e := n.Getxattr(ctx, "system.posix_acl_access", nil); e != syscall.ENOTSUP {
			t.Fatalf("Getxattr = %v", e)
		}
		if n := entries(); n != 2 {
			t.Errorf("after an ACL query: %d file entries, want 2", n)
		}
	}
}

// TestMountedLsAfterWalk: after a walk the kernel holds the listing
// without file entries; ls -l's ACL query of the directory drops it, so
// that listing again gives entries and stating every file costs no
// LOOKUP each.
func TestMountedLsAfterWalk(t *testing.T) {
	t.Parallel()
	snap, data := snapshot(t, wideDir(t, 500))
	o := testOptions()
	var logs lockedBuffer
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	dir, unmount := mount(t, NewRoot(snap, &memReader{data: data}, o), MountOptions{Debug: true})
	d := filepath.Join(dir, "d")
	if es, err := os.ReadDir(d); err != nil || len(es) != 500 {
		t.Fatalf("walk: %d entries, %v", len(es), err)
	}
	mark := logs.String()
	// ls -l asks for the directory's ACL (ENOTSUP) and stats each
	// entry as it reads the listing. Run with no working directory in
	// the mount and no inherited files (go-fuse's # Deadlocks).
	ls := requireTool(t, "ls")
	if out, err := exec.Command(ls, "-l", d).Output(); err != nil || strings.Count(string(out), "\n") != 501 {
		t.Fatalf("ls -l: %d lines, %v", strings.Count(string(out), "\n"), err)
	}
	unmount()
	ops := map[string]int{}
	for _, m := range regexp.MustCompile(`rx \d+: ([A-Z]+) `).FindAllStringSubmatch(strings.TrimPrefix(logs.String(), mark), -1) {
		ops[m[1]]++
	}
	if ops["LOOKUP"] > 5 || ops["READDIRPLUS"] == 0 {
		t.Errorf("requests of ls -l after a walk: %v; want the listing read again with entries, and no LOOKUP per file", ops)
	}
}
