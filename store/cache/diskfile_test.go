package cache

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// watchNames records the names that appear in dir (created, linked or
// renamed in) until the returned function is called, which returns them.
func watchNames(t *testing.T, dir string) func() []string {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but inotify is not usable here: %v", err)
		}
		t.Skipf("inotify: %v", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	return func() []string {
		defer unix.Close(fd)
		var names []string
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(fd, buf)
			if err != nil || n <= 0 {
				return names
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				names = append(names, strings.TrimRight(string(name), "\x00"))
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}
}

// TestDiskWriteNamesOnlyWholeBlocks: writing a member of one block makes
// no name in the directory but the member's own, once, when the file is
// whole; writing a larger member makes only its partial file's name and
// then its own. No temporary file is ever seen (nor left by a crash).
func TestDiskWriteNamesOnlyWholeBlocks(t *testing.T) {
	for _, c := range []struct {
		size  int64
		names []string
	}{{100000, []string{""}}, {2*BlockSize + 100000, []string{partSuffix, ""}}} {
		d := openDisk(t, t.TempDir(), 64*BlockSize)
		k := key(1, 0)
		data := memberData(k, c.size)
		sub := filepath.Dir(d.MemberPath(k.Digest))
		if err := os.MkdirAll(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		seen := watchNames(t, sub)
		for i := range numBlocks(c.size) {
			if err := d.Put(Key{k.Digest, i}, c.size, blockOf(data, i)); err != nil {
				t.Fatal(err)
			}
		}
		d.Flush()
		names := seen()
		var want []string
		for _, s := range c.names {
			want = append(want, k.Digest.Hex()+s)
		}
		if !slicesEqual(names, want) {
			t.Errorf("member of %d bytes: names %q appeared, want %q", c.size, names, want)
		}
		checkWhole(t, d, k, data)
		if st := d.Stats(); st.Writes != numBlocks(c.size) || st.Blocks != numBlocks(c.size) || st.WriteErrors != 0 {
			t.Fatalf("stats %+v, want %d writes", st, numBlocks(c.size))
		}
	}
}

// TestDiskWriteKeepsOtherCopy: a block another process named meanwhile is
// kept, this copy dropped, and nothing else is left in the directory.
func TestDiskWriteKeepsOtherCopy(t *testing.T) {
	for _, noTmpfile := range []bool{false, true} {
		d := openDisk(t, t.TempDir(), 64*BlockSize)
		d.noTmpfile.Store(noTmpfile)
		k := key(1, 0)
		s, err := d.stage(filepath.Dir(d.MemberPath(k.Digest)), block(k, 5000))
		if err != nil {
			t.Fatal(err)
		}
		if noTmpfile != (s.fd < 0) {
			t.Fatalf("noTmpfile %v: staged %+v", noTmpfile, s)
		}
		theirs := []byte("written by another process")
		if err := os.WriteFile(d.MemberPath(k.Digest), theirs, 0o600); err != nil {
			t.Fatal(err)
		}
		if s.fd >= 0 {
			if placed, err := d.place(s, d.MemberPath(k.Digest), block(k, 5000)); placed || err != nil {
				t.Fatalf("place over an existing block: %v, %v; want false, nil", placed, err)
			}
		} else {
			s.discard() // the writer checks for the name under the lock first
		}
		if got, _ := os.ReadFile(d.MemberPath(k.Digest)); !bytes.Equal(got, theirs) {
			t.Fatalf("noTmpfile %v: the other process's block was replaced: %q", noTmpfile, got)
		}
		left, _ := os.ReadDir(filepath.Dir(d.MemberPath(k.Digest)))
		if len(left) != 1 {
			t.Fatalf("noTmpfile %v: %d files left in the block directory, want 1", noTmpfile, len(left))
		}
	}
}

// TestDiskWriteTempNames: where O_TMPFILE is not available, blocks are
// written under temporary names and renamed, and none is left.
func TestDiskWriteTempNames(t *testing.T) {
	d := openDisk(t, t.TempDir(), 64*BlockSize)
	d.noTmpfile.Store(true)
	k := key(2, 0)
	if err := d.Put(k, 7000, block(k, 7000)); err != nil {
		t.Fatal(err)
	}
	d.Flush()
	if got, err := os.ReadFile(d.MemberPath(k.Digest)); err != nil || !bytes.Equal(got, block(k, 7000)) {
		t.Fatalf("block: %v", err)
	}
	left, _ := os.ReadDir(filepath.Dir(d.MemberPath(k.Digest)))
	if len(left) != 1 || d.Stats().Writes != 1 {
		t.Fatalf("%d files left, stats %+v; want the block alone, one write", len(left), d.Stats())
	}
}
