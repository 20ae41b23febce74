package fs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

// Tests in this file mount the fixture for real and drive it with ordinary
// system calls from the test goroutine.

func TestMountedTree(t *testing.T) {
	snap, data := snapshot(t, fixture)
	dir, _ := mount(t, NewRoot(snap, &memReader{data: data}, testOptions()), MountOptions{Name: snap.Digest().String()})

	sizes := map[string]int64{}
	for _, m := range snap.Members() {
		sizes[m.Path] = m.Size
	}
	wantNlink := map[string]uint64{"": 6, "a": 3, "a/y": 2, "a-b": 2, "train": 2, "val": 2}
	seen := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			rel = ""
		}
		seen[rel] = true
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		mode, size, nlink := uint32(syscall.S_IFREG|0o444), sizes[rel], uint64(1)
		if d.IsDir() {
			mode, size, nlink = syscall.S_IFDIR|0o555, 0, wantNlink[rel]
		}
		if st.Mode != mode || st.Size != size || uint64(st.Nlink) != nlink || st.Ino != wantInos[rel] {
			t.Errorf("%q: mode %o size %d nlink %d ino %d, want %o %d %d %d", rel, st.Mode, st.Size, st.Nlink, st.Ino, mode, size, nlink, wantInos[rel])
		}
		if st.Uid != testUID || st.Gid != testGID {
			t.Errorf("%q: owner %d:%d, want %d:%d", rel, st.Uid, st.Gid, testUID, testGID)
		}
		for _, ts := range []syscall.Timespec{st.Atim, st.Mtim, st.Ctim} {
			if got := time.Unix(ts.Unix()); !got.Equal(mtime) {
				t.Errorf("%q: time %v, want %v", rel, got, mtime)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(wantInos) {
		t.Errorf("walk saw %d nodes, want %d", len(seen), len(wantInos))
	}

	ml, ok := mountinfo(dir)
	if !ok {
		t.Fatalf("%s not in /proc/self/mountinfo", dir)
	}
	for _, o := range []string{"ro", "nosuid", "nodev"} {
		if !slices.Contains(strings.Split(ml.opts, ","), o) {
			t.Errorf("mount options %q lack %s", ml.opts, o)
		}
	}
	if ml.fstype != "fuse.pinfs" || ml.source != snap.Digest().String() || !strings.Contains(ml.superOpts, "max_read=1048576") {
		t.Errorf("mount: type %q source %q super options %q", ml.fstype, ml.source, ml.superOpts)
	}

	var sfs syscall.Statfs_t
	if err := syscall.Statfs(filepath.Join(dir, "a"), &sfs); err != nil {
		t.Fatal(err)
	}
	if total := snap.Manifest().Members.Bytes; sfs.Blocks != uint64(total+4095)/4096 || sfs.Bfree != 0 || sfs.Flags&unix.ST_RDONLY == 0 {
		t.Errorf("statfs: %d blocks, %d free, flags %#x; want %d, 0, read-only", sfs.Blocks, sfs.Bfree, sfs.Flags, (total+4095)/4096)
	}
	if _, err := os.Stat(filepath.Join(dir, "a", "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat of a missing path: %v", err)
	}
}

func TestMountedRead(t *testing.T) {
	snap, data := snapshot(t, fixture)
	r := &memReader{data: data}
	dir, _ := mount(t, NewRoot(snap, r, testOptions()), MountOptions{})
	ms := snap.Members()

	// Every file, several times over from concurrent readers.
	var wg sync.WaitGroup
	errs := make(chan error, 4*len(ms))
	for range 4 {
		wg.Go(func() {
			for i, m := range ms {
				got, err := os.ReadFile(filepath.Join(dir, m.Path))
				if err != nil {
					errs <- err
				} else if !bytes.Equal(got, data[i]) {
					errs <- fmt.Errorf("%s: content differs (%d bytes, want %d)", m.Path, len(got), len(data[i]))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, m := range ms {
		if n := r.openCount(i); n != 4 {
			t.Errorf("%s: Opened %d times, want 4", m.Path, n)
		}
	}

	i := slices.IndexFunc(ms, func(m verify.Member) bool { return m.Path == "train/part-000.jsonl" })
	f, err := os.Open(filepath.Join(dir, ms[i].Path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size := int64(len(data[i]))
	for _, c := range []struct {
		n   int
		off int64
	}{{1, 0}, {3, 1}, {4097, 4095}, {65536, 65535}, {10, 131071}, {200_000, 3}, {7, size - 3}, {10, size - 4}} {
		p := make([]byte, c.n)
		n, err := f.ReadAt(p, c.off)
		want := data[i][c.off:min(c.off+int64(c.n), size)]
		if (err != nil && !(err == io.EOF && n < c.n)) || !bytes.Equal(p[:n], want) {
			t.Errorf("ReadAt(%d@%d) = %d, %v; want %d bytes", c.n, c.off, n, err, len(want))
		}
	}
	if n, err := f.ReadAt(make([]byte, 10), size); n != 0 || err != io.EOF {
		t.Errorf("ReadAt at the end = %d, %v; want 0, EOF", n, err)
	}
}

func TestMountedInodesStable(t *testing.T) {
	snap, data := snapshot(t, fixture)
	newRoot := func() gofs.InodeEmbedder { return NewRoot(snap, &memReader{data: data}, testOptions()) }

	dir, unmount := mount(t, newRoot(), MountOptions{})
	first := viewOf(t, dir)
	if fmt.Sprint(first.inos) != fmt.Sprint(wantInos) {
		t.Errorf("inode numbers\n got %v\nwant %v", first.inos, wantInos)
	}
	var names []string
	for _, d := range first.listings[""] {
		names = append(names, fmt.Sprintf("%s:%d", d.name, d.ino))
	}
	want := []string{".:1", "..:1", "README.txt:2", "Z.txt:3", "a:4", "a-b:8", "a.b:10", "train:11", "val:14", "ü.txt:16"}
	if !slices.Equal(names, want) {
		t.Errorf("root listing\n got %q\nwant %q", names, want)
	}
	if got := first.listings["a/y"]; fmt.Sprint(got) != "[{6 .} {4 ..} {7 z.bin}]" {
		t.Errorf("a/y listing %v", got)
	}

	unmount()
	if _, ok := mountinfo(dir); ok {
		t.Fatalf("%s still mounted", dir)
	}
	dir2, _ := mount(t, newRoot(), MountOptions{})
	if again := viewOf(t, dir2); again.String() != first.String() {
		t.Errorf("after remount:\n%v\nfirst mount:\n%v", again, first)
	}
	dir3, _ := mount(t, newRoot(), MountOptions{})
	if other := viewOf(t, dir3); other.String() != first.String() {
		t.Errorf("second concurrent mount:\n%v\nfirst mount:\n%v", other, first)
	}
}

// mountWritable mounts root without the ro flag, so that every write
// reaches the nodes instead of being refused by the kernel.
func mountWritable(dir string, root gofs.InodeEmbedder) (*fuse.Server, error) {
	return gofs.Mount(dir, root, &gofs.Options{
		MountOptions: fuse.MountOptions{
			DirectMount: true, FsName: "pinfs-rw-test", Name: "pinfs",
			DirectMountFlags: syscall.MS_NODEV | syscall.MS_NOSUID,
		},
		RootStableAttr:  &gofs.StableAttr{Ino: rootIno},
		NullPermissions: true,
	})
}

func TestMountedWritesFail(t *testing.T) {
	snap, data := snapshot(t, fixture)
	for _, c := range []struct {
		name string
		mnt  func(string, gofs.InodeEmbedder) (*fuse.Server, error)
	}{
		{"ro mount", func(dir string, root gofs.InodeEmbedder) (*fuse.Server, error) {
			return Mount(dir, root, MountOptions{})
		}},
		{"without ro", mountWritable},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := mountWith(t, NewRoot(snap, &memReader{data: data}, testOptions()), c.mnt)
			before := viewOf(t, dir)
			file := filepath.Join(dir, "a", "x.bin")
			sub := filepath.Join(dir, "a", "y")
			fresh := filepath.Join(dir, "a", "new")
			openErr := func(path string, flag int) error {
				f, err := os.OpenFile(path, flag, 0o644)
				if err == nil {
					f.Close()
				}
				return err
			}
			mtime := time.Unix(1, 0)
			for name, op := range map[string]func() error{
				"open O_WRONLY":       func() error { return openErr(file, os.O_WRONLY) },
				"open O_RDWR":         func() error { return openErr(file, os.O_RDWR) },
				"open O_APPEND":       func() error { return openErr(file, os.O_WRONLY|os.O_APPEND) },
				"open O_TRUNC":        func() error { return openErr(file, os.O_RDONLY|os.O_TRUNC) },
				"open O_CREAT":        func() error { return openErr(fresh, os.O_WRONLY|os.O_CREATE) },
				"open O_CREAT rdonly": func() error { return openErr(fresh, os.O_RDONLY|os.O_CREATE) },
				"open O_TMPFILE": func() error {
					fd, err := unix.Open(filepath.Join(dir, "a"), unix.O_TMPFILE|unix.O_WRONLY, 0o600)
					if err == nil {
						unix.Close(fd)
					}
					return err
				},
				"truncate":   func() error { return os.Truncate(file, 0) },
				"mkdir":      func() error { return os.Mkdir(fresh, 0o755) },
				"mknod":      func() error { return unix.Mknod(fresh, unix.S_IFIFO|0o644, 0) },
				"rmdir":      func() error { return syscall.Rmdir(sub) },
				"unlink":     func() error { return syscall.Unlink(file) },
				"rename":     func() error { return os.Rename(file, fresh) },
				"rename dir": func() error { return os.Rename(sub, fresh) },
				"symlink":    func() error { return os.Symlink("x.bin", fresh) },
				"link":       func() error { return os.Link(file, fresh) },
				"chmod":      func() error { return os.Chmod(file, 0o644) },
				"chmod dir":  func() error { return os.Chmod(sub, 0o755) },
				"chown":      func() error { return os.Chown(file, 1, 1) },
				"utimes":     func() error { return os.Chtimes(file, mtime, mtime) },
				"setxattr":   func() error { return unix.Setxattr(file, "user.note", []byte("x"), 0) },
				"setxattr root": func() error {
					return unix.Setxattr(dir, XattrManifest, []byte("sha256:0"), unix.XATTR_REPLACE)
				},
				"removexattr": func() error { return unix.Removexattr(file, XattrDigest) },
			} {
				if err := op(); !errors.Is(err, syscall.EROFS) {
					t.Errorf("%s: %v, want EROFS", name, err)
				}
			}
			if after := viewOf(t, dir); after.String() != before.String() {
				t.Errorf("the tree changed:\n%v\nbefore:\n%v", after, before)
			}
			if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, content("a/x.bin", 4096)) {
				t.Errorf("a/x.bin after the writes: %d bytes, %v", len(got), err)
			}
		})
	}
}

func TestMountedXattrs(t *testing.T) {
	snap, data := snapshot(t, fixture)
	dir, _ := mount(t, NewRoot(snap, &memReader{data: data}, testOptions()), MountOptions{})
	ms := snap.Members()
	get := func(path, name string) (string, error) {
		n, err := unix.Getxattr(path, name, nil)
		if err != nil {
			return "", err
		}
		b := make([]byte, n)
		n, err = unix.Getxattr(path, name, b)
		return string(b[:n]), err
	}
	list := func(path string) []string {
		n, err := unix.Listxattr(path, nil)
		if err != nil {
			t.Fatalf("listxattr %s: %v", path, err)
		}
		b := make([]byte, n)
		n, err = unix.Listxattr(path, b)
		if err != nil {
			t.Fatalf("listxattr %s: %v", path, err)
		}
		return strings.Split(strings.TrimSuffix(string(b[:n]), "\x00"), "\x00")
	}

	for i, m := range ms {
		p := filepath.Join(dir, m.Path)
		want := map[string]string{XattrDigest: m.Digest, XattrID: m.ID, XattrSource: m.Source()}
		if m.Split != "" {
			want[XattrSplit] = m.Split
		}
		if m.S3 != nil {
			want[XattrVersionID] = m.S3.VersionID
		}
		got := map[string]string{}
		for _, name := range list(p) {
			v, err := get(p, name)
			if err != nil {
				t.Errorf("%s: getxattr %s: %v", m.Path, name, err)
			}
			got[name] = v
		}
		if !equalMaps(got, want) {
			t.Errorf("member %d %s xattrs\n got %q\nwant %q", i, m.Path, got, want)
		}
		if _, err := get(p, XattrManifest); !errors.Is(err, unix.ENODATA) {
			t.Errorf("%s: getxattr %s: %v, want ENODATA", m.Path, XattrManifest, err)
		}
	}
	if v, err := get(dir, XattrManifest); err != nil || v != snap.Digest().String() {
		t.Errorf("root %s = %q, %v", XattrManifest, v, err)
	}
	if _, err := unix.Getxattr(filepath.Join(dir, "a.b"), XattrDigest, make([]byte, 8)); !errors.Is(err, unix.ERANGE) {
		t.Errorf("getxattr into 8 bytes: %v, want ERANGE", err)
	}
	// ls -l asks for these of every file and stops asking on a device
	// that answers ENOTSUP; go-fuse's IgnoreSecurityLabels would answer
	// the ACL names with ENODATA before the nodes see them.
	for _, p := range []string{dir, filepath.Join(dir, "a"), filepath.Join(dir, "a.b")} {
		for _, name := range []string{"security.selinux", "system.posix_acl_access", "system.posix_acl_default", "security.capability", "trusted.x"} {
			if _, err := unix.Lgetxattr(p, name, nil); !errors.Is(err, unix.ENOTSUP) {
				t.Errorf("lgetxattr %s %s: %v, want ENOTSUP", p, name, err)
			}
		}
	}
	if _, err := get(filepath.Join(dir, "a"), "user.other"); !errors.Is(err, unix.ENODATA) {
		t.Errorf("getxattr of a directory: %v, want ENODATA", err)
	}

	// getfattr -d, which lists user.* by default. Run with no working
	// directory and no inherited files, so that the child does not touch
	// the mount before exec (go-fuse's # Deadlocks).
	getfattr := requireTool(t, "getfattr")
	p := filepath.Join(dir, "train", "part-000.jsonl")
	out, err := exec.Command(getfattr, "-d", "--absolute-names", p).CombinedOutput()
	if err != nil {
		t.Fatalf("getfattr -d: %v\n%s", err, out)
	}
	i := slices.IndexFunc(ms, func(m verify.Member) bool { return m.Path == "train/part-000.jsonl" })
	for _, line := range []string{
		XattrDigest + `="` + ms[i].Digest + `"`, XattrID + `="id:train/part-000.jsonl"`,
		XattrSource + `="s3://bucket/data/train/part-000.jsonl"`, XattrSplit + `="train"`,
		XattrVersionID + `="v.train/part-000.jsonl"`,
	} {
		if !strings.Contains(string(out), line) {
			t.Errorf("getfattr -d lacks %s:\n%s", line, out)
		}
	}
}

func TestMountedReadErrors(t *testing.T) {
	snap, data := snapshot(t, fixture)
	ms := snap.Members()
	idx := func(p string) int { return slices.IndexFunc(ms, func(m verify.Member) bool { return m.Path == p }) }
	r := &memReader{data: data, fail: map[int]error{
		idx("a.b"):        fmt.Errorf("get s3://bucket/data/a.b: %w", store.ErrAccessDenied),
		idx("Z.txt"):      mismatchErr(t, ms[idx("Z.txt")], data[idx("Z.txt")]),
		idx("README.txt"): fmt.Errorf("get cas: %w", store.ErrNotFound),
	}, short: map[int]bool{idx("a/x.bin"): true}}
	o := testOptions()
	var logs lockedBuffer
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	dir, _ := mount(t, NewRoot(snap, r, o), MountOptions{})
	for p, want := range map[string]syscall.Errno{
		"a.b": syscall.EACCES, "Z.txt": syscall.EIO, "README.txt": syscall.EIO, "a/x.bin": syscall.EIO,
	} {
		_, err := os.ReadFile(filepath.Join(dir, p))
		if !errors.Is(err, want) {
			t.Errorf("read %s: %v, want %v", p, err, want)
		}
		if fi, err := os.Stat(filepath.Join(dir, p)); err != nil || fi.Size() != int64(len(data[idx(p)])) {
			t.Errorf("stat %s after a failed read: %v, %v", p, fi, err)
		}
	}
	// The mismatch is recognised as such, not as just any I/O error.
	// (The kernel may retry a failed read, so there can be more than one.)
	n := 0
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "integrity failure") {
			n++
			if !strings.Contains(l, "read Z.txt") {
				t.Errorf("integrity failure logged for another read: %s", l)
			}
		}
	}
	if n == 0 {
		t.Errorf("the mismatch of Z.txt was not logged as an integrity failure:\n%s", logs.String())
	}
}

// lockedBuffer is a bytes.Buffer that the FUSE server's goroutines can
// write to while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMountedReadNoSplice reads an 8 MiB member in 1 MiB requests through
// a SliceReader and a plain Reader: neither makes go-fuse try to splice
// (it used to log "trySplice: ... max pipe size" for every 1 MiB reply),
// and the SliceReader's bytes are what the kernel gets.
func TestMountedReadNoSplice(t *testing.T) {
	snap, data := snapshot(t, []spec{{path: "big.bin", size: 8 << 20}, {path: "odd.bin", size: 3<<20 + 12345}})
	sr := &sliceReader{memReader: &memReader{data: data}, cut: 65536}
	for _, c := range []struct {
		name string
		r    Reader
	}{{"slices", sr}, {"plain", &memReader{data: data}}} {
		t.Run(c.name, func(t *testing.T) {
			o := testOptions()
			var logs lockedBuffer
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			dir, unmount := mount(t, NewRoot(snap, c.r, o), MountOptions{})
			for i, m := range snap.Members() {
				f, err := os.Open(filepath.Join(dir, m.Path))
				if err != nil {
					t.Fatal(err)
				}
				var got bytes.Buffer
				_, err = io.CopyBuffer(&got, f, make([]byte, 1<<20))
				f.Close()
				if err != nil || !bytes.Equal(got.Bytes(), data[i]) {
					t.Errorf("%s: %d bytes, err %v; want the member's %d bytes", m.Path, got.Len(), err, len(data[i]))
				}
			}
			unmount()
			if strings.Contains(logs.String(), "trySplice") || strings.Contains(logs.String(), "splice:") {
				t.Errorf("the mount tried to splice replies:\n%s", logs.String())
			}
		})
	}
	if sr.callCount() == 0 {
		t.Error("the mount never asked the SliceReader for slices")
	}
}

// TestMountedRoundTrips reads a small file cold, as a data loader does,
// and checks the requests the kernel sent for it in the debug log: no
// FLUSH on close (FOPEN_NOFLUSH), and still one OPEN, which the Reader
// hears of (Opened).
func TestMountedRoundTrips(t *testing.T) {
	snap, data := snapshot(t, []spec{{path: "d/a.bin", size: 256 << 10}})
	r := &memReader{data: data}
	o := testOptions()
	var logs lockedBuffer
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	dir, unmount := mount(t, NewRoot(snap, r, o), MountOptions{Debug: true})
	got, err := os.ReadFile(filepath.Join(dir, "d/a.bin"))
	if err != nil || !bytes.Equal(got, data[0]) {
		t.Fatalf("read: %d bytes, %v", len(got), err)
	}
	unmount()
	// The requests from the file's lookup on (go-fuse's own at mount time
	// come before it).
	log := logs.String()
	k := strings.Index(log, "a.bin")
	if k < 0 {
		t.Fatalf("no lookup of a.bin in the debug log:\n%s", log)
	}
	ops := map[string]int{}
	for _, m := range regexp.MustCompile(`rx \d+: ([A-Z]+) `).FindAllStringSubmatch(log[k:], -1) {
		ops[m[1]]++
	}
	if ops["FLUSH"] != 0 || ops["OPEN"] != 1 || ops["READ"] == 0 || r.openCount(0) != 1 {
		t.Errorf("requests for one cold read: %v, Opened %d times; want no FLUSH, one OPEN, Opened once", ops, r.openCount(0))
	}
}
