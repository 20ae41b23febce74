package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/s3test"
)

// Messages the member table index logs (verify/index.go); the tests of
// issue 26 look for them in a mount's log.
const (
	indexNoRoom   = "cannot keep the member table's index in the cache dir; serving the table from memory"
	indexNotUsed  = "member table index not used"
	indexFailed   = "member table index failed a digest while in use"
	indexIndexed  = "member table indexed"
	indexEntryDir = "meta/index"
)

// indexSource is a snapshot shaped to catch an index whose order, ranges
// or lookups drift from the table's: names with bytes that sort before
// '/' beside a directory of the same stem ("a-b", "a.c" and "a/…"; "b!"
// and "b/…"), unicode names (the NFC and NFD spellings of é are two
// members), a deep path, directories that hold only directories, and a
// directory of many files (at least 3).
func indexSource(t testing.TB, many int) map[string][]byte {
	t.Helper()
	data := map[string][]byte{
		"a-b":                           []byte("a dash b\n"),
		"a.c":                           []byte("a dot c\n"),
		"a/x.txt":                       []byte("a x\n"),
		"a/y/z.txt":                     []byte("a y z\n"),
		"a0":                            []byte("a zero\n"),
		"b!":                            []byte("b bang\n"),
		"b/c":                           []byte("b c\n"),
		"b/c-d/e":                       []byte("b c-d e\n"),
		"unicode/café.txt":              []byte("café\n"),
		"unicode/日本語/ファイル.bin":          randomBytes(t, 3000),
		"unicode/emoji-🙂.txt":           []byte("🙂\n"),
		"unicode/é":                     []byte("nfc\n"),
		"unicode/e\u0301":               []byte("nfd\n"),
		"only/dirs/here/x/f.txt":        []byte("deep in dirs\n"),
		"only/also/y/g.txt":             []byte("also\n"),
		"train/big.bin":                 randomBytes(t, 1<<20+4321), // two blocks
		"val/v.txt":                     []byte("validation\n"),
		"empty":                         {},
		"deep/" + deepDirs + "leaf.txt": []byte("leaf\n"),
	}
	for i := range many {
		data[fmt.Sprintf("many/f-%03d.bin", i)] = randomBytes(t, 1+i*7)
	}
	return data
}

// manyFiles is a few hundred: indexSource's large directory for the tests
// whose listings it is meant to stretch.
const manyFiles = 250

const deepDirs = "d1/d2/d3/d4/d5/d6/d7/d8/d9/d10/d11/d12/"

// The parts of a mount that indexView looks at besides the full find.
var (
	viewDirs  = []string{"a", "b", "many", "unicode", "only", "deep/" + deepDirs}
	viewFiles = []string{"a-b", "a.c", "b!", "b/c-d/e", "unicode/日本語/ファイル.bin", "unicode/é", "unicode/e\u0301",
		"deep/" + deepDirs + "leaf.txt", "many/f-002.bin", "train/big.bin", "empty"}
)

// indexView is what a user sees of a mount, by name: `find -printf '%i
// %y %s %p\n'` (inodes, types, sizes, order), `ls -la` of the root and
// viewDirs, and the xattrs (getfattr -d) and bytes of viewFiles, which it
// checks against data.
func indexView(t testing.TB, mnt string, data map[string][]byte) map[string]string {
	t.Helper()
	getfattr, _ := tool(t, "getfattr", "attr")
	v := map[string]string{"find": inDir(t, mnt, "find", ".", "-printf", `%i %y %s %p\n`)}
	if n, want := strings.Count(v["find"], "\n"), treeEntries(data); n != want {
		t.Errorf("find lists %d entries, the snapshot has %d", n, want)
	}
	// The root's ".." is outside the mount.
	v["ls -lA ."] = inDir(t, mnt, "ls", "-lA", "--time-style=full-iso", ".")
	v["ls -la"] = inDir(t, mnt, "ls", append([]string{"-la", "--time-style=full-iso"}, viewDirs...)...)
	if getfattr != "" {
		v["getfattr"] = inDir(t, mnt, getfattr, append([]string{"-d", "-m", "-"}, viewFiles...)...)
	}
	for _, f := range viewFiles {
		b, err := readFile(t, filepath.Join(mnt, f))
		if err != nil || string(b) != string(data[f]) {
			t.Errorf("%s: %d bytes (%v), pinned %d", f, len(b), err, len(data[f]))
		}
		v["bytes "+f] = string(b)
	}
	return v
}

// sameView fails the test where got differs from want, naming the part.
func sameView(t testing.TB, what string, got, want map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Errorf("%s: %s differs:\n%s", what, k, firstDiff(got[k], want[k]))
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d parts, want %d", what, len(got), len(want))
	}
}

// firstDiff shows the first line where a and b differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d: %q\n   want %q", i+1, x, y)
		}
	}
	return "(same lines)"
}

// inDir runs name args in dir, bounded in time, and returns its stdout;
// a command that fails fails the test. Paths are relative to dir, so two
// mounts give the same output.
func inDir(t testing.TB, dir, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, errb.String())
	}
	return string(out)
}

// logCount returns how many lines of daemon d's log contain msg.
func logCount(t testing.TB, d *daemon, msg string) int {
	t.Helper()
	b, err := os.ReadFile(d.log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), msg)
}

// wantLogged fails the test unless d's log has msg n times.
func wantLogged(t testing.TB, d *daemon, msg string, n int) {
	t.Helper()
	if got := logCount(t, d, msg); got != n {
		b, _ := os.ReadFile(d.log)
		t.Errorf("mount log has %q %d times, want %d:\n%s", msg, got, n, b)
	}
}

// indexOf returns the one index directory in cache's metadata cache.
func indexOf(t testing.TB, cache string) string {
	t.Helper()
	ps, _ := filepath.Glob(filepath.Join(cache, indexEntryDir, "*.v1"))
	if len(ps) != 1 {
		t.Fatalf("%s holds indexes %v, want one", filepath.Join(cache, indexEntryDir), ps)
	}
	if _, err := os.Stat(filepath.Join(ps[0], "header")); err != nil {
		t.Fatalf("index without a header: %v", err)
	}
	return ps[0]
}

// noRoomCache returns a cache dir whose metadata cache cannot hold an
// index: meta/index is a regular file.
func noRoomCache(t testing.TB) string {
	t.Helper()
	cache := filepath.Join(t.TempDir(), "cache")
	if err := os.MkdirAll(filepath.Join(cache, "meta"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cache, indexEntryDir), []byte("not a directory\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cache
}

// localIndexFixture pins data from a local directory into a local store.
func localIndexFixture(t *testing.T, data map[string][]byte) *fixture {
	t.Helper()
	work := t.TempDir()
	src := filepath.Join(work, "src")
	for rel, b := range data {
		writeFile(t, filepath.Join(src, filepath.FromSlash(rel)), string(b))
	}
	f := &fixture{store: filepath.Join(work, "store"), data: data, work: work}
	f.digest = mustPinfs(t, nil, "pin", src, "--store", f.store).lastLine()
	return f
}

// s3IndexFixture puts data in a versioned bucket and pins it into an S3
// store: the table then has version ids and ETags, and pinfs run show
// reads it through the cache dir (for a local store it reads the store).
func s3IndexFixture(t *testing.T, data map[string][]byte) *fixture {
	t.Helper()
	s := s3test.Start(t)
	s.CreateBucket(t, "data", true)
	s.CreateBucket(t, "store", true)
	f := &fixture{s: s, env: s.Env(), store: "s3://store/pinfs", data: data, vers: map[string]string{}, work: t.TempDir()}
	for k, v := range data {
		f.vers[k] = s.Put(t, "data", "ds/"+k, v)
	}
	f.digest = mustPinfs(t, f.env, "pin", "s3://data/ds/", "--store", f.store).lastLine()
	return f
}

var (
	lsCacheOnce sync.Once
	lsCache     bool
)

// lsCacheDir returns the flags that make pinfs ls read through cache, or
// none when this pinfs ls has no --cache-dir.
func lsCacheDir(t testing.TB, cache string) []string {
	t.Helper()
	lsCacheOnce.Do(func() {
		r := pinfs(t, nil, "ls", "--help")
		lsCache = strings.Contains(r.stdout+r.stderr, "--cache-dir")
	})
	if !lsCache {
		return nil
	}
	return []string{"--cache-dir", cache}
}
