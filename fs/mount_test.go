package fs

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// requireFUSE skips a test when /dev/fuse is missing, except under CI=true,
// where it fails.
func requireFUSE(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but FUSE is not available: %v", err)
		}
		t.Skipf("FUSE not available: %v", err)
	}
}

// requireTool returns the path of the command-line tool name. When it is
// not installed it skips the test, except under CI=true, where it fails
// (.ci/run installs every tool the tests use).
func requireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s is not installed: %v", name, err)
		}
		t.Skipf("%s not installed: %v", name, err)
	}
	return p
}

// mountWith mounts root at a new directory with mnt and unmounts it when
// the test ends. It returns the directory and a function that unmounts
// early (idempotent).
func mountWith(t testing.TB, root gofs.InodeEmbedder, mnt func(dir string, root gofs.InodeEmbedder) (*fuse.Server, error)) (string, func()) {
	t.Helper()
	requireFUSE(t)
	dir := t.TempDir()
	srv, err := mnt(dir, root)
	if err != nil {
		t.Fatalf("mount at %s: %v", dir, err)
	}
	var once sync.Once
	unmount := func() { once.Do(func() { unmountBounded(t, srv, dir) }) }
	t.Cleanup(unmount) // runs before TempDir's removal
	return dir, unmount
}

// mount mounts root with Mount.
func mount(t testing.TB, root gofs.InodeEmbedder, o MountOptions) (string, func()) {
	t.Helper()
	return mountWith(t, root, func(dir string, root gofs.InodeEmbedder) (*fuse.Server, error) {
		return Mount(dir, root, o)
	})
}

// unmountBounded unmounts dir, waiting at most a few seconds; when that
// fails it detaches the mount (lazy unmount) and aborts the connection,
// so that no mount is ever left behind.
func unmountBounded(t testing.TB, srv *fuse.Server, dir string) {
	t.Helper()
	conn := connection(dir)
	done := make(chan error, 1)
	go func() { done <- srv.Unmount() }()
	select {
	case err := <-done:
		if err == nil {
			return
		}
		t.Errorf("unmount %s: %v", dir, err)
	case <-time.After(10 * time.Second):
		t.Errorf("unmount %s: timed out", dir)
	}
	if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
		t.Errorf("lazy unmount %s: %v", dir, err)
	}
	if conn != "" {
		_ = os.WriteFile("/sys/fs/fuse/connections/"+conn+"/abort", []byte("1"), 0)
	}
}

// mountLine is the /proc/self/mountinfo entry of a mount point.
type mountLine struct {
	dev, opts, fstype, source, superOpts string
}

// mountinfo returns the last entry for dir in /proc/self/mountinfo.
func mountinfo(dir string) (mountLine, bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return mountLine{}, false
	}
	defer f.Close()
	var ml mountLine
	found := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		fs := strings.Fields(s.Text())
		if len(fs) < 10 || fs[4] != dir {
			continue
		}
		sep := 6
		for sep < len(fs) && fs[sep] != "-" {
			sep++
		}
		if sep+3 >= len(fs) {
			continue
		}
		ml, found = mountLine{dev: fs[2], opts: fs[5], fstype: fs[sep+1], source: fs[sep+2], superOpts: fs[sep+3]}, true
	}
	return ml, found
}

// connection returns the FUSE connection number of the mount at dir.
func connection(dir string) string {
	ml, ok := mountinfo(dir)
	if !ok {
		return ""
	}
	_, minor, _ := strings.Cut(ml.dev, ":")
	return minor
}

// dirent is one entry of a directory as getdents64 returns it.
type dirent struct {
	ino  uint64
	name string
}

// readdir lists dir in the order the file system returns it, with the
// inode numbers of the entries, "." and ".." included.
func readdir(t testing.TB, dir string) []dirent {
	t.Helper()
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	var ds []dirent
	buf := make([]byte, 4096) // small, to exercise continuation offsets
	for {
		n, err := syscall.Getdents(fd, buf)
		if err != nil {
			t.Fatalf("getdents %s: %v", dir, err)
		}
		if n == 0 {
			return ds
		}
		for b := buf[:n]; len(b) > 0; {
			// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
			reclen := binary.NativeEndian.Uint16(b[16:18])
			name := b[19:reclen]
			name = name[:strings.IndexByte(string(name), 0)]
			ds = append(ds, dirent{ino: binary.NativeEndian.Uint64(b[0:8]), name: string(name)})
			b = b[reclen:]
		}
	}
}

// view is what a mount shows of its tree: the inode number of every path
// and every directory's listing in order.
type view struct {
	inos     map[string]uint64
	listings map[string][]dirent
}

func viewOf(t testing.TB, dir string) view {
	t.Helper()
	v := view{inos: map[string]uint64{}, listings: map[string][]dirent{}}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			rel = ""
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		v.inos[rel] = fi.Sys().(*syscall.Stat_t).Ino
		if d.IsDir() {
			v.listings[rel] = readdir(t, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (v view) String() string { return fmt.Sprintf("inos %v\nlistings %v", v.inos, v.listings) }
