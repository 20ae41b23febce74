package cache

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/store/cache/cachetest"
)

// dirBytes sums the bytes the member files under dir hold: a whole
// file's size, the blocks present in a partial file.
func dirBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // evicted meanwhile
		}
		if err != nil {
			return err
		}
		h, part := strings.CutSuffix(e.Name(), partSuffix)
		if !isHex(h, 64) || !e.Type().IsRegular() {
			return nil
		}
		if part {
			if held, _, err := partHeld(p); err == nil {
				n += held
			}
		} else if info, err := e.Info(); err == nil {
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Two Disks on one directory (two mounts sharing a cache dir) keep the
// directory within the budget together, and each finds the blocks the
// other wrote.
func TestDiskSharedBudget(t *testing.T) { sharedBudget(t, t.TempDir()) }

func sharedBudget(t *testing.T, dir string) {
	const bs, limit = 1000, 10 * 1000
	a, b := openDisk(t, dir, limit), openDisk(t, dir, limit)
	ka, kb := key(100, 0), key(200, 0)
	if err := put(a, ka, block(ka, bs)); err != nil {
		t.Fatal(err)
	}
	if err := put(b, kb, block(kb, bs)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		d *Disk
		k Key
	}{{b, ka}, {a, kb}} {
		if !c.d.Has(c.k, bs) {
			t.Errorf("Has(%v): a block the other Disk wrote is not found", c.k)
		}
		if got, ok := c.d.Get(c.k, bs); !ok || !bytes.Equal(got, block(c.k, bs)) {
			t.Errorf("Get(%v) = %v: a block the other Disk wrote is not served", c.k, ok)
		}
	}

	var wg sync.WaitGroup
	for g, d := range []*Disk{a, b} {
		wg.Go(func() {
			for i := range 30 {
				k := key(1000*(g+1)+i, 0)
				if err := put(d, k, block(k, bs)); err != nil {
					t.Error(err)
				}
				if n := dirBytes(t, dir); n > limit+2*bs {
					t.Errorf("directory holds %d bytes, budget %d", n, limit)
				}
			}
		})
	}
	wg.Wait()
	if n := dirBytes(t, dir); n > limit {
		t.Fatalf("directory holds %d bytes after 62 blocks of %d, budget %d", n, bs, limit)
	}
}

// logBuffer returns a logger that writes into the returned buffer.
func logBuffer() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, nil)), &buf
}

// Without extended attributes the totals are kept in a symbolic link.
func TestDiskSharedBudgetWithoutXattrs(t *testing.T) {
	get, set := getxattr, setxattr
	t.Cleanup(func() { getxattr, setxattr = get, set })
	getxattr = func(int, string, []byte) (int, error) { return 0, unix.ENOTSUP }
	setxattr = func(int, string, []byte, int) error { return unix.ENOTSUP }
	dir := t.TempDir()
	sharedBudget(t, dir)
	n := dirBytes(t, dir)
	if s, err := os.Readlink(filepath.Join(dir, usageName)); err != nil || s != fmt.Sprintf("%d %d", n, n/1000) {
		t.Fatalf("usage link = %q, %v; the directory holds %d bytes", s, err, n)
	}
}

// A directory that cannot be created does not stop the mount: the tier is
// disabled, with a warning.
func TestDiskUncreatableDir(t *testing.T) {
	parent := t.TempDir()
	cachetest.ReadOnly(t, parent)
	log, buf := logBuffer()
	d, err := OpenDisk(filepath.Join(parent, "blocks"), 1<<20, WithLogger(log))
	if err != nil {
		t.Fatalf("OpenDisk: %v", err)
	}
	k := key(1, 0)
	if err := put(d, k, block(k, 100)); err != nil {
		t.Fatalf("Put into a disabled tier: %v", err)
	}
	if _, ok := d.Get(k, 100); ok {
		t.Fatal("hit in a tier that could not be created")
	}
	if !strings.Contains(buf.String(), "disk cache disabled") {
		t.Fatalf("no warning: %q", buf)
	}
}

// A directory that cannot be written serves the blocks it holds; new ones
// are not kept, and each failed write is counted and the first logged (Put
// itself returns at once: the writer fails later).
func TestDiskReadOnlyDir(t *testing.T) {
	dir := t.TempDir()
	old := key(1, 0)
	put(openDisk(t, dir, 1<<20), old, block(old, 100))
	cachetest.ReadOnly(t, dir)
	log, buf := logBuffer()
	d, err := OpenDisk(dir, 1<<20, WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if b, ok := d.Get(old, 100); !ok || !bytes.Equal(b, block(old, 100)) {
		t.Fatalf("Get of a block already there = %v", ok)
	}
	for i := range 3 {
		k := key(2+i, 0)
		put(d, k, block(k, 100))
		if _, ok := d.Get(k, 100); ok {
			t.Fatal("hit for a block that could not be written")
		}
	}
	if st := d.Stats(); st.WriteErrors != 4 || st.Writes != 0 { // Open's own write, then 3 Puts
		t.Fatalf("stats %+v, want 4 write errors", st)
	}
	if n := strings.Count(buf.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d warnings, want 1: %s", n, buf)
	}
}

// A full file system: writes fail, are counted and logged once.
func TestDiskFullDir(t *testing.T) {
	dir := cachetest.FullDir(t)
	log, buf := logBuffer()
	d, err := OpenDisk(dir, 1<<20, WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	for i := range 3 {
		k := key(i, 0)
		put(d, k, block(k, 64<<10))
		if _, ok := d.Get(k, 64<<10); ok {
			t.Fatal("hit for a block a full file system could not take")
		}
	}
	if st := d.Stats(); st.WriteErrors != 3 || st.Writes != 0 {
		t.Fatalf("stats %+v, want 3 write errors", st)
	}
	if n := strings.Count(buf.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d warnings, want 1: %s", n, buf)
	}
	if len(files(t, dir)) != 1 {
		t.Fatalf("a failed Put left files: %v", files(t, dir))
	}
	// The blocks of a larger member, written into a partial file, fail the
	// same way, and leave no partial file behind.
	k := key(9, 0)
	data := memberData(k, 3*BlockSize)
	putMember(t, d, k, data, []int64{0, 1, 2})
	if d.Has(Key{k.Digest, 1}, 3*BlockSize) {
		t.Fatal("hit for a block a full file system could not take")
	}
	if st := d.Stats(); st.WriteErrors != 6 || st.Writes != 0 {
		t.Fatalf("stats %+v, want 6 write errors", st)
	}
	if n := strings.Count(buf.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d warnings, want 1: %s", n, buf)
	}
	if len(files(t, dir)) != 1 {
		t.Fatalf("a failed Put left files: %v", files(t, dir))
	}
}

// childEnv names the directory a child process of TestDiskSharedProcesses
// writes blocks into.
const childEnv = "PINFS_CACHE_TEST_SHARED_DIR"

// TestDiskSharedChild is the child of TestDiskSharedProcesses; run
// directly, it does nothing.
func TestDiskSharedChild(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		return
	}
	d := openDisk(t, dir, 10*BlockSize)
	seed := os.Getpid()
	for i := range 40 {
		k := key(seed*1000+i, 0)
		if err := put(d, k, block(k, BlockSize/4)); err != nil {
			t.Fatal(err)
		}
	}
}

// Two processes sharing a directory keep it within the budget together.
func TestDiskSharedProcesses(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^TestDiskSharedChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), childEnv+"="+dir)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("child: %v\n%s", err, out)
			}
		})
	}
	wg.Wait()
	// 80 quarter blocks written, 20 fit.
	if n := dirBytes(t, dir); n > 10*BlockSize || n < 5*BlockSize {
		t.Fatalf("directory holds %d bytes, budget %d", n, 10*BlockSize)
	}
	if st := openDisk(t, dir, 10*BlockSize).Stats(); st.Bytes != dirBytes(t, dir) {
		t.Fatalf("totals %+v, %d bytes in files", st, dirBytes(t, dir))
	}
}

// sameMemberEnv names the directory a child process of
// TestDiskSameMemberProcesses writes one shared member into.
const sameMemberEnv = "PINFS_CACHE_TEST_SAME_MEMBER_DIR"

// sameMember is the member both children write.
func sameMember() (Key, []byte) {
	k := key(42, 0)
	return k, memberData(k, 12*BlockSize+10)
}

// TestDiskSameMemberChild is the child of TestDiskSameMemberProcesses; run
// directly, it does nothing.
func TestDiskSameMemberChild(t *testing.T) {
	dir := os.Getenv(sameMemberEnv)
	if dir == "" {
		return
	}
	d := openDisk(t, dir, 64*BlockSize)
	k, data := sameMember()
	for n, i := range rand.Perm(int(numBlocks(int64(len(data))))) {
		if err := d.Put(Key{k.Digest, int64(i)}, int64(len(data)), blockOf(data, int64(i))); err != nil {
			t.Fatal(err)
		}
		if n%2 == 1 {
			d.Flush()
		}
	}
}

// Two processes writing the same member at once end with one whole-member
// file of the right bytes, and totals that count it once.
func TestDiskSameMemberProcesses(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^TestDiskSameMemberChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), sameMemberEnv+"="+dir)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("child: %v\n%s", err, out)
			}
		})
	}
	wg.Wait()
	k, data := sameMember()
	// The totals the children kept, before a listing corrects them.
	buf := make([]byte, 64)
	if n, err := unix.Getxattr(dir, usageAttr, buf); err != nil || string(buf[:n]) != fmt.Sprintf("%d 13", len(data)) {
		t.Fatalf("totals kept %q (%v), want %d bytes in 13 blocks", buf[:max(n, 0)], err, len(data))
	}
	d := openDisk(t, dir, 64*BlockSize)
	checkWhole(t, d, k, data)
	if got := files(t, dir); len(got) != 1 {
		t.Fatalf("files %v, want the whole-member file alone", got)
	}
	if st := d.Stats(); st.Bytes != int64(len(data)) || st.Blocks != 13 {
		t.Fatalf("totals %+v, want %d bytes in 13 blocks", st, len(data))
	}
}
