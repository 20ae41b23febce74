package cache

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// files lists the regular files under dir, relative to it.
func files(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func openDisk(t testing.TB, dir string, limit int64) *Disk {
	t.Helper()
	d, err := OpenDisk(dir, limit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestDiskPutGet(t *testing.T) {
	dir := t.TempDir()
	d := openDisk(t, dir, 1<<20)
	k := key(1, 0)
	if _, ok := d.Get(k, 1000); ok {
		t.Fatal("hit in an empty cache")
	}
	if err := put(d, k, block(k, 1000)); err != nil {
		t.Fatal(err)
	}
	b, ok := d.Get(k, 1000)
	if !ok || !bytes.Equal(b, block(k, 1000)) {
		t.Fatalf("Get after Put: %v", ok)
	}
	h := k.Digest.Hex()
	want := []string{filepath.Join(h[:2], h)}
	if got := files(t, dir); !slicesEqual(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	d.Remove(k)
	if _, ok := d.Get(k, 1000); ok {
		t.Fatal("hit after Remove")
	}
	if got := files(t, dir); len(got) != 0 {
		t.Fatalf("files after Remove: %v", got)
	}
	st := d.Stats()
	if st.Hits != 1 || st.Misses != 2 || st.Bytes != 0 || st.Blocks != 0 || st.Writes != 1 || st.Removed != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }

func TestDiskDisabled(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "blocks")
	d := openDisk(t, dir, 0)
	k := key(1, 0)
	if err := put(d, k, block(k, 10)); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Get(k, 10); ok {
		t.Fatal("disabled tier hit")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("disabled tier created its directory: %v", err)
	}
	var nilDisk *Disk
	if _, ok := nilDisk.Get(k, 10); ok || nilDisk.Put(k, 10, nil) != nil {
		t.Fatal("nil Disk is not a disabled tier")
	}
	nilDisk.Remove(k)
}

// age sets the modification time of k's whole-member file to base + i minutes.
func age(t testing.TB, d *Disk, k Key, base time.Time, i int) {
	t.Helper()
	mt := base.Add(time.Duration(i) * time.Minute)
	if err := os.Chtimes(d.MemberPath(k.Digest), mt, mt); err != nil {
		t.Fatal(err)
	}
}

func TestDiskLRU(t *testing.T) {
	dir := t.TempDir()
	const bs = 1000
	d := openDisk(t, dir, 8*bs) // low-water mark 7 blocks
	base := time.Now().Add(-time.Hour)
	for i := range 8 {
		k := key(i, 0)
		put(d, k, block(k, bs))
		age(t, d, k, base, i) // 0 is the oldest
	}
	if st := d.Stats(); st.Evictions != 0 || st.Bytes != 8*bs {
		t.Fatalf("full tier: %+v", st)
	}
	// 0 is now the most recently used (the open path touches a whole
	// file; Get does not, TestDiskGetWholeKeepsTimes); 1 and 2 the least.
	age(t, d, key(0, 0), base, 30)
	// A ninth block: the tier evicts down to 7 blocks less room for it.
	put(d, key(8, 0), block(key(8, 0), bs))
	for i := range 9 {
		_, ok := d.Get(key(i, 0), bs)
		if want := i != 1 && i != 2; ok != want {
			t.Errorf("block %d held: %v, want %v", i, ok, want)
		}
	}
	st := d.Stats()
	if st.Bytes != 7*bs || st.Blocks != 7 || st.Evictions != 2 || len(files(t, dir)) != 7 {
		t.Fatalf("stats %+v, files %v", st, files(t, dir))
	}
	// A block larger than the whole budget is not cached and evicts nothing.
	big := key(9, 0)
	put(d, big, block(big, 9*bs))
	if _, ok := d.Get(big, 9*bs); ok || d.Stats().Blocks != 7 {
		t.Fatal("an oversized block was cached")
	}
}

func TestDiskReopen(t *testing.T) {
	dir := t.TempDir()
	const bs = 1000
	d := openDisk(t, dir, 10*bs)
	base := time.Now().Add(-time.Hour)
	for i := range 4 {
		k := key(i, 0)
		put(d, k, block(k, bs))
		// Block 2 is the oldest, then 0, 3, 1.
		age := map[int]int{2: 0, 0: 1, 3: 2, 1: 3}[i]
		mt := base.Add(time.Duration(age) * time.Minute)
		os.Chtimes(d.MemberPath(k.Digest), mt, mt)
	}
	// Leftovers of a crashed writer and of a torn write, and a foreign file.
	sub := filepath.Dir(d.MemberPath(key(0, 0).Digest))
	os.WriteFile(filepath.Join(sub, tmpPrefix+"123"), []byte("partial"), 0o600)
	old := time.Now().Add(-2 * staleTemp)
	os.Chtimes(filepath.Join(sub, tmpPrefix+"123"), old, old)
	// A fresh temp file may be another process's write in progress: kept.
	os.WriteFile(filepath.Join(sub, tmpPrefix+"456"), []byte("writing"), 0o600)
	emptyKey := key(5, 0)
	os.MkdirAll(filepath.Dir(d.MemberPath(emptyKey.Digest)), 0o755)
	os.WriteFile(d.MemberPath(emptyKey.Digest), nil, 0o600)
	os.WriteFile(filepath.Join(dir, "README"), []byte("not a block"), 0o600)

	// Reopen with room for two blocks: the two oldest (2 and 0) go.
	d2 := openDisk(t, dir, 2*bs)
	st := d2.Stats()
	if st.Bytes != 2*bs || st.Blocks != 2 || st.Evictions != 2 {
		t.Fatalf("after reopen: %+v", st)
	}
	for i, want := range map[int]bool{0: false, 1: true, 2: false, 3: true} {
		k := key(i, 0)
		b, ok := d2.Get(k, bs)
		if ok != want || ok && !bytes.Equal(b, block(k, bs)) {
			t.Errorf("block %d: hit %v, want %v", i, ok, want)
		}
	}
	for _, f := range files(t, dir) {
		if strings.Contains(f, tmpPrefix+"123") || strings.HasPrefix(filepath.Base(f), emptyKey.Digest.Hex()) {
			t.Errorf("Open left %s", f)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "README")); err != nil {
		t.Errorf("Open removed a file that is not a block: %v", err)
	}
	if _, err := os.Stat(filepath.Join(sub, tmpPrefix+"456")); err != nil {
		t.Errorf("Open removed a temp file another process may be writing: %v", err)
	}
}

func TestDiskVanishedFile(t *testing.T) {
	d := openDisk(t, t.TempDir(), 1<<20)
	k := key(1, 0)
	put(d, k, block(k, 100))
	os.Remove(d.MemberPath(k.Digest))
	if _, ok := d.Get(k, 100); ok || d.Has(k, 100) {
		t.Fatal("hit for a deleted file")
	}
	// The totals are corrected by the next listing of the directory.
	if st := openDisk(t, d.Dir(), 1<<20).Stats(); st.Blocks != 0 || st.Bytes != 0 {
		t.Fatalf("a vanished file is still accounted: %+v", st)
	}
}

func TestDiskConcurrent(t *testing.T) {
	dir := t.TempDir()
	const bs = 4096
	d := openDisk(t, dir, 8*bs)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				k := key((g*7+i)%20, 0)
				switch i % 3 {
				case 0:
					if err := put(d, k, block(k, bs)); err != nil {
						t.Error(err)
					}
				case 1:
					if b, ok := d.Get(k, bs); ok && !bytes.Equal(b, block(k, bs)) {
						t.Errorf("block %v: wrong bytes", k)
					}
				case 2:
					if i%10 == 2 {
						d.Remove(k)
					}
				}
			}
		})
	}
	wg.Wait()
	st := d.Stats()
	fs := files(t, dir)
	if st.Bytes > 8*bs || int64(len(fs)) != st.Blocks || st.Bytes != st.Blocks*bs {
		t.Fatalf("stats %+v with %d files", st, len(fs))
	}
	for _, f := range fs {
		if strings.Contains(f, tmpPrefix) {
			t.Errorf("temp file left: %s", f)
		}
	}
}

// put is Put then Flush: the block is in the directory, or its write
// failed, when it returns. b is taken as the last block of its member, so
// that any index and length make a valid block.
func put(d *Disk, k Key, b []byte) error {
	err := d.Put(k, k.Index*BlockSize+int64(len(b)), b)
	d.Flush()
	return err
}
