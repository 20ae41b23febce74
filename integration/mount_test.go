package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/fusetest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/integration/s3test"
	"github.com/pinfs/pinfs/verify/b3"
)

// fixture is a pinned dataset in a real S3 server.
type fixture struct {
	s      *s3test.Server
	env    []string
	store  string
	digest string
	data   map[string][]byte // member path -> pinned bytes
	vers   map[string]string // member path -> pinned version id
	work   string            // per-test directory for caches and records
}

// pinFixture puts a dataset under data/ds/, pins it, then overwrites one
// key so that the mount must serve the pinned version, not the latest.
func pinFixture(t *testing.T) *fixture {
	t.Helper()
	fusetest.Require(t)
	s := s3test.Start(t)
	f := &fixture{s: s, env: s.Env(), store: "s3://store/pinfs", data: map[string][]byte{}, vers: map[string]string{}, work: t.TempDir()}
	s.CreateBucket(t, "data", true)
	s.CreateBucket(t, "store", true)
	for k, v := range map[string][]byte{
		"train/big.bin":         randomBytes(t, 3<<20+12345), // several 1 MiB blocks, a partial last one
		"train/mid.bin":         randomBytes(t, 200_000),
		"train/shards/s-00.txt": []byte("shard zero\n"),
		"train/shards/s-01.txt": []byte("shard one\n"),
		"val/v.txt":             []byte("validation\n"),
		"empty":                 {},
		"README":                []byte("readme\n"),
	} {
		f.data[k] = v
		f.vers[k] = s.Put(t, "data", "ds/"+k, v)
	}
	f.digest = mustPinfs(t, f.env, "pin", "s3://data/ds/", "--store", f.store).lastLine()
	s.Put(t, "data", "ds/train/mid.bin", []byte("overwritten after the pin"))
	return f
}

// mount mounts the fixture at a new directory with the given cache dir
// and run record, plus extra flags.
func (f *fixture) mount(t *testing.T, cache, record string, extra ...string) (string, *daemon) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), f.digest)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := append([]string{f.digest, dir, "--store", f.store, "--cache-dir", cache, "--run-record", record}, extra...)
	return dir, startMount(t, f.env, dir, args...)
}

// events reads the run record's events of kind (all when kind is "").
func events(t testing.TB, record, kind string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	s := bufio.NewScanner(bytes.NewReader(b))
	s.Buffer(nil, 64<<20)
	for s.Scan() {
		var e map[string]any
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			t.Fatalf("run record line %q: %v", s.Text(), err)
		}
		if kind == "" || e["event"] == kind {
			out = append(out, e)
		}
	}
	return out
}

// tool returns the path of the command name (from the Debian package
// pkg). When it is missing the check that needs it is left out with a
// log line, or, under CI=true, the test fails: CI must run every check.
func tool(t testing.TB, name, pkg string) (string, bool) {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p, true
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but %s is not installed (apt-get install -y %s): %v", name, pkg, err)
	}
	t.Logf("%s not installed (apt-get install -y %s): leaving its check out", name, pkg)
	return "", false
}

func readFile(t testing.TB, p string) ([]byte, error) {
	return inMount(t, 60*time.Second, func() ([]byte, error) { return os.ReadFile(p) })
}

func TestMountServesPinnedBytes(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	dir, _ := f.mount(t, filepath.Join(f.work, "cache"), filepath.Join(f.work, "run.jsonl"))

	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if info.Mode().Perm() != 0o555 {
				t.Errorf("dir %s mode %v, want 0555", rel, info.Mode())
			}
			return nil
		}
		files = append(files, rel)
		if info.Mode().Perm() != 0o444 || !info.Mode().IsRegular() {
			t.Errorf("file %s mode %v, want 0444 regular", rel, info.Mode())
		}
		if info.Size() != int64(len(f.data[rel])) {
			t.Errorf("file %s size %d, want %d", rel, info.Size(), len(f.data[rel]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(func(yield func(string) bool) {
		for k := range f.data {
			if !yield(k) {
				return
			}
		}
	})
	if slices.Sort(files); !slices.Equal(files, want) {
		t.Fatalf("mount has files %v, manifest %v", files, want)
	}
	for _, rel := range files {
		p := filepath.Join(dir, rel)
		got, err := readFile(t, p)
		if err != nil || !bytes.Equal(got, f.data[rel]) {
			t.Errorf("%s: read %d bytes (%v), want the %d pinned bytes", rel, len(got), err, len(f.data[rel]))
		}
		digest := b3.Of(f.data[rel]).String()
		buf := make([]byte, 128)
		n, err := unix.Getxattr(p, "user.pinfs.digest", buf)
		if err != nil || string(buf[:n]) != digest {
			t.Errorf("%s: user.pinfs.digest = %q (%v), want %s", rel, buf[:n], err, digest)
		}
		n, err = unix.Getxattr(p, "user.pinfs.version_id", buf)
		if err != nil || string(buf[:n]) != f.vers[rel] {
			t.Errorf("%s: user.pinfs.version_id = %q (%v), want %s", rel, buf[:n], err, f.vers[rel])
		}
		if b3sum, ok := tool(t, "b3sum", "b3sum"); ok {
			out, err := exec.Command(b3sum, "--no-names", p).Output()
			if err != nil || "blake3:"+strings.TrimSpace(string(out)) != digest {
				t.Errorf("%s: b3sum says %q (%v), manifest %s", rel, out, err, digest)
			}
		}
	}
	buf := make([]byte, 128)
	if n, err := unix.Getxattr(dir, "user.pinfs.manifest", buf); err != nil || string(buf[:n]) != f.digest {
		t.Errorf("root user.pinfs.manifest = %q (%v)", buf[:n], err)
	}
	if getfattr, ok := tool(t, "getfattr", "attr"); ok {
		out, err := exec.Command(getfattr, "-d", filepath.Join(dir, "val/v.txt")).CombinedOutput()
		if err != nil {
			t.Errorf("getfattr -d: %v\n%s", err, out)
		}
		for _, a := range []string{"user.pinfs.digest", "user.pinfs.version_id", "user.pinfs.source", "user.pinfs.id", "user.pinfs.split=\"val\""} {
			if !strings.Contains(string(out), a) {
				t.Errorf("getfattr -d lacks %s:\n%s", a, out)
			}
		}
	}
}

func TestMountRandomConcurrentReads(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	dir, _ := f.mount(t, filepath.Join(f.work, "cache"), filepath.Join(f.work, "run.jsonl"), "--cache-mem", "2MiB")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for r := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for _, rel := range []string{"train/big.bin", "train/mid.bin"} {
				want := f.data[rel]
				fh, err := os.Open(filepath.Join(dir, rel))
				if err != nil {
					errs <- err
					return
				}
				for range 60 {
					off := rng.Int64N(int64(len(want)) + 1000)
					n := rng.IntN(3 << 20)
					buf := make([]byte, n)
					got, err := fh.ReadAt(buf, off)
					end := min(off+int64(n), int64(len(want)))
					wantN := max(end-off, 0)
					if int64(got) != wantN || (err != nil && wantN == int64(n)) || !bytes.Equal(buf[:got], want[min(off, int64(len(want))):end]) {
						errs <- errors.New(rel + ": ReadAt returned other bytes than the pinned ones")
						break
					}
				}
				fh.Close()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("random readers did not finish in 3 minutes")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// tree returns every path's inode number and each directory's listing order.
func tree(t testing.TB, dir string) (map[string]uint64, map[string][]string) {
	t.Helper()
	inos, order := map[string]uint64{}, map[string][]string{}
	var walk func(rel string)
	walk = func(rel string) {
		p := filepath.Join(dir, rel)
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		inos[rel] = st.Ino
		d, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		names, err := d.Readdirnames(-1) // getdents order, not sorted by Go
		d.Close()
		if err != nil {
			return // a file
		}
		order[rel] = names
		for _, n := range names {
			walk(filepath.Join(rel, n))
		}
	}
	walk(".")
	return inos, order
}

func TestMountInodesAndOrderAreStable(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	cache, record := filepath.Join(f.work, "cache"), filepath.Join(f.work, "run.jsonl")
	dir1, d1 := f.mount(t, cache, record)
	inos1, order1 := tree(t, dir1)
	dir2, _ := f.mount(t, cache, record) // a second mount of the same digest, at the same time
	inos2, order2 := tree(t, dir2)
	d1.stop(t, 10*time.Second)
	dir3, _ := f.mount(t, t.TempDir(), filepath.Join(f.work, "run3.jsonl")) // a remount, other cache
	inos3, order3 := tree(t, dir3)
	if want := treeEntries(f.data); len(inos1) != want {
		t.Errorf("tree has %d entries, the fixture's paths make %d: %v", len(inos1), want, inos1)
	}
	for name, got := range map[string]map[string]uint64{"second mount": inos2, "remount": inos3} {
		if !mapsEqual(got, inos1) {
			t.Errorf("%s: inode numbers differ:\n%v\n%v", name, got, inos1)
		}
	}
	for name, got := range map[string]map[string][]string{"second mount": order2, "remount": order3} {
		for k, v := range order1 {
			if !slices.Equal(got[k], v) {
				t.Errorf("%s: readdir order of %s = %v, first mount %v", name, k, got[k], v)
			}
		}
	}
}

// treeEntries returns how many entries a mount of the member paths has:
// the root, one file per member, and each directory above a member once.
func treeEntries[V any](members map[string]V) int {
	dirs := map[string]bool{}
	for p := range members {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	return 1 + len(members) + len(dirs)
}

func mapsEqual(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestMountIsReadOnly(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	before := versions(t, f.s)
	dir, _ := f.mount(t, filepath.Join(f.work, "cache"), filepath.Join(f.work, "run.jsonl"))
	file := filepath.Join(dir, "val/v.txt")
	for name, op := range map[string]func() error{
		"open for write": func() error { fh, err := os.OpenFile(file, os.O_WRONLY, 0); fh.Close(); return err },
		"open rdwr":      func() error { fh, err := os.OpenFile(file, os.O_RDWR, 0); fh.Close(); return err },
		"create":         func() error { fh, err := os.Create(filepath.Join(dir, "new")); fh.Close(); return err },
		"truncate":       func() error { return os.Truncate(file, 0) },
		"mkdir":          func() error { return os.Mkdir(filepath.Join(dir, "d"), 0o755) },
		"rmdir":          func() error { return syscall.Rmdir(filepath.Join(dir, "val")) },
		"unlink":         func() error { return os.Remove(file) },
		"rename":         func() error { return os.Rename(file, filepath.Join(dir, "val/w.txt")) },
		"symlink":        func() error { return os.Symlink("x", filepath.Join(dir, "l")) },
		"link":           func() error { return os.Link(file, filepath.Join(dir, "h")) },
		"chmod":          func() error { return os.Chmod(file, 0o644) },
		"chown":          func() error { return os.Chown(file, 1, 1) },
		"utimes":         func() error { return os.Chtimes(file, time.Now(), time.Now()) },
		"setxattr":       func() error { return unix.Setxattr(file, "user.x", []byte("1"), 0) },
		"removexattr":    func() error { return unix.Removexattr(file, "user.pinfs.digest") },
	} {
		if err := op(); !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s: %v, want EROFS", name, err)
		}
	}
	if after := versions(t, f.s); !slices.Equal(after, before) {
		t.Errorf("buckets changed:\nbefore %v\nafter  %v", before, after)
	}
	if b, _ := readFile(t, file); !bytes.Equal(b, f.data["val/v.txt"]) {
		t.Error("file changed")
	}
}

func TestBackgroundMountReturnsWhenReadyAndUnmounts(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	dir := filepath.Join(t.TempDir(), "m")
	os.MkdirAll(dir, 0o755)
	record := filepath.Join(f.work, "run.jsonl")
	t.Cleanup(func() { fusetest.ForceUnmount(t, dir) })
	r := mustPinfs(t, f.env, "mount", f.digest, dir, "--store", f.store, "--cache-dir", filepath.Join(f.work, "cache"), "--run-record", record)
	var runID string
	var pid int
	if _, err := fmt.Sscanf(r.stdout, "run %s mounted at", &runID); err != nil {
		t.Fatalf("mount output %q: %v", r.stdout, err)
	}
	if i := strings.Index(r.stdout, "(pid "); i >= 0 {
		fmt.Sscanf(r.stdout[i:], "(pid %d", &pid)
	}
	t.Cleanup(func() {
		if pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	// Ready means ready: the very next call reads the file.
	if b, err := readFile(t, filepath.Join(dir, "README")); err != nil || !bytes.Equal(b, f.data["README"]) {
		t.Fatalf("read right after mount returned: %v", err)
	}
	mustPinfs(t, f.env, "unmount", dir)
	deadline := time.Now().Add(20 * time.Second)
	for {
		all := events(t, record, "")
		if len(all) > 0 && all[len(all)-1]["event"] == "run_end" && all[len(all)-1]["run_id"] == runID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run_end for %s after unmount: %v", runID, all)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if fusetest.Mounted(dir) {
		t.Error("still mounted after pinfs unmount")
	}
}

func TestRunRecordInS3(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	dir, d := f.mount(t, filepath.Join(f.work, "cache"), "s3://store/runs", "--run-id", "s3-run")
	if _, err := readFile(t, filepath.Join(dir, "README")); err != nil {
		t.Fatal(err)
	}
	d.stop(t, 10*time.Second)
	if code := d.exitCode(t, time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	out, err := f.s.Client(t).ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String("store"), Prefix: aws.String("runs/runs/s3-run/")})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, *o.Key)
	}
	joined := strings.Join(keys, "\n")
	for _, want := range []string{"run.json", "run_start", "consumed", "run_end"} {
		if !strings.Contains(joined, want) {
			t.Errorf("run record objects lack %s:\n%s", want, joined)
		}
	}
}

// versions lists every object version (key, id, size, etag) in the data
// and store buckets.
func versions(t testing.TB, s *s3test.Server) []string {
	t.Helper()
	var out []string
	for _, b := range []string{"data", "store"} {
		p := s3.NewListObjectVersionsPaginator(s.Client(t), &s3.ListObjectVersionsInput{Bucket: aws.String(b)})
		for p.HasMorePages() {
			page, err := p.NextPage(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range page.Versions {
				out = append(out, fmt.Sprintf("%s/%s@%s %d %s", b, *v.Key, *v.VersionId, *v.Size, *v.ETag))
			}
		}
	}
	slices.Sort(out)
	return out
}
