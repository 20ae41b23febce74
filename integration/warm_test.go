package integration

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/verify/b3"
)

// warmSummary is what pinfs warm --json prints.
type warmSummary struct {
	Members      int     `json:"members"`
	Bytes        int64   `json:"bytes"`
	CachedBytes  int64   `json:"cached_bytes"`
	FetchedBytes int64   `json:"fetched_bytes"`
	Seconds      float64 `json:"seconds"`
}

// warm runs pinfs warm --json on the fixture with cache dir cacheDir and
// returns its summary; it fails the test unless pinfs exits 0.
func (f *fixture) warm(t *testing.T, cacheDir string, args ...string) warmSummary {
	t.Helper()
	r := mustPinfs(t, f.env, append([]string{"warm", f.digest, "--store", f.store, "--cache-dir", cacheDir, "--json"}, args...)...)
	var s warmSummary
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("pinfs warm --json: %v: %v", err, r)
	}
	return s
}

// cachedMembers returns the fixture members whose every block is in the
// disk cache under cacheDir, and fails the test for any cached block whose
// bytes differ from the pinned ones.
func (f *fixture) cachedMembers(t *testing.T, cacheDir string) []string {
	t.Helper()
	disk, err := cacheDisk(filepath.Join(cacheDir, "blocks"))
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	var out []string
	for p, data := range f.data {
		d, all := b3.Of(data), len(data) > 0
		for i := 0; i*cacheBlock < len(data); i++ {
			b, ok := disk.Get(cache.Key{Digest: d, Index: int64(i)}, int64(len(data)))
			if ok && !bytes.Equal(b, data[i*cacheBlock:min(len(data), (i+1)*cacheBlock)]) {
				t.Errorf("%s: block %d in the disk cache is not the pinned bytes", p, i)
			}
			all = all && ok
		}
		if all {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

const cacheBlock = cache.BlockSize

func cacheDisk(dir string) (*cache.Disk, error) { return cache.OpenDisk(dir, 1<<40) }

func (f *fixture) bytesOf(paths ...string) int64 {
	var n int64
	for _, p := range paths {
		n += int64(len(f.data[p]))
	}
	return n
}

// TestWarmThenMountWithStoreDown warms the whole snapshot, stops the S3
// server, warms again (nothing to fetch) and mounts on the same cache dir:
// every member reads back as pinned.
func TestWarmThenMountWithStoreDown(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	cacheDir := filepath.Join(f.work, "cache")
	s := f.warm(t, cacheDir, "--jobs", "4")
	var all []string
	for p := range f.data {
		all = append(all, p)
	}
	if s.Members != len(f.data) || s.Bytes != f.bytesOf(all...) || s.CachedBytes != 0 || s.FetchedBytes != s.Bytes {
		t.Errorf("first warm: %+v, want %d members, %d bytes, all fetched", s, len(f.data), f.bytesOf(all...))
	}
	slices.Sort(all)
	if got := f.cachedMembers(t, cacheDir); !slices.Equal(got, slices.DeleteFunc(all, func(p string) bool { return p == "empty" })) {
		t.Errorf("cached after warm: %q", got)
	}

	f.s.Stop()
	if s := f.warm(t, cacheDir); s.FetchedBytes != 0 || s.CachedBytes != s.Bytes {
		t.Errorf("warm of a warm cache with the store down: %+v", s)
	}
	dir, _ := f.mount(t, cacheDir, filepath.Join(f.work, "run.jsonl"), "--cache-mem", "0")
	for rel, want := range f.data {
		if b, err := readFile(t, filepath.Join(dir, rel)); err != nil || !bytes.Equal(b, want) {
			t.Errorf("%s after warm, store down: %d bytes, %v", rel, len(b), err)
		}
	}
}

// TestWarmSelectsByPathAndSplit checks that PATH and --split warm exactly
// the members they name.
func TestWarmSelectsByPathAndSplit(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"dir", []string{"/train/shards/"}, []string{"train/shards/s-00.txt", "train/shards/s-01.txt"}},
		{"file and split", []string{"README", "train/mid.bin", "--split", "train"}, []string{"train/mid.bin"}},
		{"split", []string{"--split", "val"}, []string{"val/v.txt"}},
		{"two", []string{"val", "train/big.bin"}, []string{"train/big.bin", "val/v.txt"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cacheDir := filepath.Join(t.TempDir(), "cache")
			s := f.warm(t, cacheDir, c.args...)
			if s.Members != len(c.want) || s.Bytes != f.bytesOf(c.want...) {
				t.Errorf("summary %+v, want %d members of %d bytes", s, len(c.want), f.bytesOf(c.want...))
			}
			if got := f.cachedMembers(t, cacheDir); !slices.Equal(got, c.want) {
				t.Errorf("cached %q, want %q", got, c.want)
			}
		})
	}
}

// TestWarmFailsOnBadBytes: a version whose bytes were changed at rest, or
// deleted, fails the warm with exit 1 naming the member, as pinfs verify
// does, and no bad block enters the cache.
func TestWarmFailsOnBadBytes(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	flip(t, f.s.VersionPath(t, "data", "ds/train/big.bin", f.vers["train/big.bin"]), 2<<20+5)
	cacheDir := filepath.Join(f.work, "cache")
	args := []string{"warm", f.digest, "train", "--store", f.store, "--cache-dir", cacheDir}
	const tampered = `member "train/big.bin": content does not match its pinned digest`
	if r := wantExit(t, f.env, 1, nil, args...); r.stdout != "" || !strings.Contains(lastStderrLine(r), tampered) {
		t.Errorf("want nothing on stdout and the last line of stderr naming %s: %v", tampered, r)
	}
	f.cachedMembers(t, cacheDir) // fails on a cached block that is not the pinned bytes
	disk, err := cacheDisk(filepath.Join(cacheDir, "blocks"))
	if err != nil {
		t.Fatal(err)
	}
	if disk.Has(cache.Key{Digest: b3.Of(f.data["train/big.bin"]), Index: 2}, int64(len(f.data["train/big.bin"]))) {
		t.Error("the tampered block is in the disk cache")
	}
	disk.Close()
	wantExit(t, f.env, 1, nil, "verify", f.digest, "--store", f.store, "--deep")

	f.s.DeleteVersion(t, "data", "ds/val/v.txt", f.vers["val/v.txt"])
	wantExit(t, f.env, 1, []string{`member "val/v.txt": pinned version missing`},
		"warm", f.digest, "val", "--store", f.store, "--cache-dir", cacheDir)
	wantExit(t, f.env, 1, []string{"val/v.txt"}, "verify", f.digest, "--store", f.store)
}

// lastStderrLine is the last line pinfs wrote to stderr (the progress bar
// comes before it).
func lastStderrLine(r result) string {
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	return lines[len(lines)-1]
}

// TestWarmRefusesBadInput: a name that is not a digest, a PATH or split
// that selects nothing, a selection over the disk budget: exit 2 with one
// line naming it, and nothing fetched.
func TestWarmRefusesBadInput(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	cacheDir := filepath.Join(f.work, "cache")
	base := []string{"--store", f.store, "--cache-dir", cacheDir}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"latest"}, "digests only"},
		{[]string{f.digest[:20]}, "digests only"},
		{[]string{f.digest, "train/nope"}, `"train/nope" selects no member`},
		{[]string{f.digest, "train/big"}, `"train/big" selects no member`},
		{[]string{f.digest, "--split", "test"}, `split "test" selects no member`},
		{[]string{f.digest, "val", "--split", "train"}, `split "train" selects no member`},
		{[]string{f.digest, "--cache-disk", "1MiB"}, "does not fit the disk cache budget of 1048576 bytes"},
		{[]string{f.digest, "--cache-disk", "0"}, "disk cache is disabled"},
	} {
		r := wantExit(t, f.env, 2, []string{c.want}, append([]string{"warm"}, append(c.args, base...)...)...)
		if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || r.stdout != "" {
			t.Errorf("warm %q: want one line on stderr, nothing on stdout: %v", c.args, r)
		}
	}
	if got := f.cachedMembers(t, cacheDir); len(got) != 0 {
		t.Errorf("refused warms cached %q", got)
	}
}
