package cache

import (
	"os"
	"path/filepath"
	"testing"
)

// Files of the one-file-per-block layout are removed by the first
// listing, and not counted.
func TestDiskOldLayoutRemoved(t *testing.T) {
	dir := t.TempDir()
	k := key(1, 0)
	h := k.Digest.Hex()
	sub := filepath.Join(dir, h[:2])
	os.MkdirAll(sub, 0o700)
	for _, name := range []string{h + "-0", h + "-1"} {
		if err := os.WriteFile(filepath.Join(sub, name), make([]byte, 1000), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d := openDisk(t, dir, 64*BlockSize)
	if got := files(t, dir); len(got) != 0 {
		t.Fatalf("old-layout files left: %v", got)
	}
	if st := d.Stats(); st.Bytes != 0 || st.Blocks != 0 {
		t.Fatalf("old-layout files counted: %+v", st)
	}
}

// What a crash can leave: a partial file without its trailer (cut short
// before the rename that completes it), with a trailer that disagrees with
// its length, with no bit set, or not a regular file. A listing removes
// them and counts a sound partial file by its bits, the last block at its
// exact length.
func TestDiskCrashLeftovers(t *testing.T) {
	dir := t.TempDir()
	d := openDisk(t, dir, 64*BlockSize)
	good := key(1, 0)
	size := int64(3*BlockSize + 10)
	putMember(t, d, good, memberData(good, size), []int64{0, 3})
	d.Close()
	mk := func(i int, n int64, b []byte) string {
		p := d.partPath(key(i, 0).Digest)
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			os.Truncate(p, n)
		}
		return p
	}
	bad := []string{
		mk(2, 3*BlockSize+10, nil), // cut to the member's size: no trailer
		mk(3, partLen(size)+1, nil),
		mk(4, partLen(size), nil), // a trailer of zeros: size 0
	}
	empty := newTrailer(size)
	p := mk(5, 0, nil)
	os.Truncate(p, trailerOff(size))
	f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(empty.encode())
	f.Close()
	bad = append(bad, p) // no bit set
	sound, err := os.ReadFile(d.partPath(good.Digest))
	if err != nil {
		t.Fatal(err)
	}
	bad = append(bad, mk(7, 0, append(sound, 0))) // a sound trailer, one byte too many
	sym := d.partPath(key(6, 0).Digest)
	os.MkdirAll(filepath.Dir(sym), 0o700)
	os.Symlink(d.partPath(good.Digest), sym)

	d2 := openDisk(t, dir, 64*BlockSize)
	for _, b := range bad {
		if _, err := os.Lstat(b); err == nil {
			t.Errorf("a damaged partial file is left: %s", filepath.Base(b))
		}
	}
	if st := d2.Stats(); st.Bytes != BlockSize+10 || st.Blocks != 2 {
		t.Fatalf("stats %+v, want %d bytes in 2 blocks", st, BlockSize+10)
	}
	if _, ok := d2.Get(Key{key(6, 0).Digest, 0}, size); ok {
		t.Fatal("a block served through a symbolic link")
	}
}

// A whole-member file of the wrong size is no member: Get removes it.
func TestDiskWholeWrongSize(t *testing.T) {
	d := openDisk(t, t.TempDir(), 64*BlockSize)
	k := key(1, 0)
	size := int64(2 * BlockSize)
	putMember(t, d, k, memberData(k, size), []int64{0, 1})
	os.Chmod(d.MemberPath(k.Digest), 0o600)
	os.Truncate(d.MemberPath(k.Digest), size-1)
	if _, ok := d.Get(Key{k.Digest, 0}, size); ok {
		t.Fatal("a whole-member file of the wrong size is served")
	}
	if _, err := os.Lstat(d.MemberPath(k.Digest)); err == nil {
		t.Fatal("a whole-member file of the wrong size is left")
	}
	// One the reader never asked for (Has says no, nothing removes it)
	// does not stand in the way of the good copy the writer makes.
	o := key(2, 0)
	putMember(t, d, o, memberData(o, size), []int64{0, 1})
	os.Truncate(d.MemberPath(o.Digest), size-1)
	if d.Has(Key{o.Digest, 0}, size) {
		t.Fatal("Has: a whole-member file of the wrong size")
	}
	putMember(t, d, o, memberData(o, size), []int64{0, 1})
	checkWhole(t, d, o, memberData(o, size))
	// (The totals drift by what a hand cut off, which the tier cannot know;
	// a listing corrects them.)
	if st := openDisk(t, d.Dir(), 64*BlockSize).Stats(); st.Bytes != size {
		t.Fatalf("listed %+v; want %d bytes", st, size)
	}
}
