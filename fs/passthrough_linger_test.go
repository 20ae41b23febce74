package fs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// TestPassthroughReleaseLinger: go-fuse lets go of an inode's backing id
// only after the last passthrough open's Release returns, and hands that
// id to an open in between, so for backingLinger after the release a new
// open is given the same backing file, rechecked, even when the member
// file's name now names another file; one that fails the recheck gets a
// cached open; after the linger the file is closed, and the next open
// asks the Backer again.
func TestPassthroughReleaseLinger(t *testing.T) {
	snap, data := snapshot(t, fixture)
	ps := paths(t, fixture)
	big := memberIndex(t, ps, "train/part-000.jsonl")
	r := newBackReader(t, data, big)
	root, dir, _ := mountProbed(t, snap, r)
	if _, err := os.Stat(filepath.Join(dir, ps[big])); err != nil {
		t.Fatal(err)
	}
	f := fileNode(t, root, dir, ps[big])
	ctx := context.Background()
	open := func() gofs.FileHandle {
		t.Helper()
		h, _, errno := f.openPassthrough(ctx, r)
		if errno != 0 {
			t.Fatalf("open: %v", errno)
		}
		return h
	}
	backingOf := func(h gofs.FileHandle) *os.File {
		t.Helper()
		ph, ok := h.(*passthroughHandle)
		if !ok {
			t.Fatalf("open: %T, want a passthrough handle", h)
		}
		return ph.backing
	}
	rechecks := func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.rechecks[big]
	}

	h1 := open()
	first := backingOf(h1)
	h1.(gofs.FileReleaser).Release(ctx)
	// The member file's name now names another file of the same bytes.
	name := filepath.Join(r.dir, strconv.Itoa(big))
	if err := os.WriteFile(name+".new", data[big], 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(name+".new", name); err != nil {
		t.Fatal(err)
	}
	h2 := open()
	if got := backingOf(h2); got != first || rechecks() != 1 {
		t.Fatalf("an open just after the last release: backing %v, %d rechecks; want the released open's file %v, rechecked once", got.Name(), rechecks(), first.Name())
	}
	h2.(gofs.FileReleaser).Release(ctx)

	// The lingering file written to in place: a cached open, not EIO.
	w, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(first.Fd())), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.WriteAt([]byte{data[big][0] ^ 0xff}, 0)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	h3 := open()
	if _, ok := h3.(*cachedHandle); !ok {
		t.Fatalf("an open sharing a changed lingering file: %T, want a cached handle", h3)
	}
	h3.(gofs.FileReleaser).Release(ctx)

	waitReleased(t, root, dir, ps[big])
	h4 := open()
	if got := backingOf(h4); got == first {
		t.Fatal("an open after the linger was given the closed file")
	}
	if _, backings, _ := r.counts(big); backings != 2 {
		t.Errorf("%d Backing calls, want 2 (the first open and the one after the linger)", backings)
	}
	h4.(gofs.FileReleaser).Release(ctx)
	waitReleased(t, root, dir, ps[big])
}

// TestPassthroughReopenQuickly: opens of one file one after the other,
// each closed before the next (so some arrive between a release and
// go-fuse's letting go of the backing id), all read the member's bytes,
// and the node ends with no open counted and its backing file closed.
func TestPassthroughReopenQuickly(t *testing.T) {
	snap, data := snapshot(t, fixture)
	ps := paths(t, fixture)
	big := memberIndex(t, ps, "train/part-000.jsonl")
	r := newBackReader(t, data, big)
	root, dir, _ := mountProbed(t, snap, r)
	p := filepath.Join(dir, ps[big])
	for i := range 200 {
		if got := readAll(t, p); !bytes.Equal(got, data[big]) {
			t.Fatalf("open %d: %d bytes differ from the member's %d", i, len(got), len(data[big]))
		}
	}
	waitReleased(t, root, dir, ps[big])
	reads, backings, passed := r.counts(big)
	if reads != 0 || passed != 200 {
		t.Errorf("%d ReadAt, %d PassedThrough; want 0, 200", reads, passed)
	}
	t.Logf("200 opens: %d Backing calls, the others shared a lingering backing file", backings)
}

// TestPassthroughBackingRemoved: the member file of a live passthrough
// open removed (evicted, by this mount or another sharing the cache dir)
// leaves that open reading the member's bytes from the kernel's
// reference to the file, with no ReadAt.
func TestPassthroughBackingRemoved(t *testing.T) {
	snap, data := snapshot(t, fixture)
	ps := paths(t, fixture)
	big := memberIndex(t, ps, "train/part-000.jsonl")
	r := newBackReader(t, data, big)
	_, dir, _ := mountProbed(t, snap, r)
	live, err := os.Open(filepath.Join(dir, ps[big]))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := os.Remove(filepath.Join(r.dir, strconv.Itoa(big))); err != nil {
		t.Fatal(err)
	}
	r.setBacked(big, false)
	got := make([]byte, len(data[big])+1)
	n, _ := live.ReadAt(got, 0)
	if !bytes.Equal(got[:n], data[big]) {
		t.Fatalf("a live open after its backing file was removed: %d bytes, differ from the member's %d", n, len(data[big]))
	}
	if reads, _, passed := r.counts(big); reads != 0 || passed != 1 {
		t.Errorf("%d ReadAt, %d PassedThrough; want 0, 1", reads, passed)
	}
}
