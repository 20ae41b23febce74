package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/fusetest"
	"github.com/pinfs/pinfs/integration/s3test"
)

// TestPassthroughOpenSurvivesEviction: two mounts share a cache dir and
// its budget. Mount a holds a warmed member open by passthrough and has
// read part of it; mount b reads other members until the shared budget
// evicts that member's file (the least recently used); a reads the rest
// through the same open, with the pinned bytes: the kernel holds the
// backing file, and a's daemon serves none of it. The directory then holds
// no more than the budget.
func TestPassthroughOpenSurvivesEviction(t *testing.T) {
	t.Parallel()
	fusetest.Require(t)
	s := s3test.Start(t)
	s.CreateBucket(t, "data", true)
	s.CreateBucket(t, "store", true)
	// Five members of three blocks (2 MiB + 100 KiB), against a budget
	// that holds one of them but not two.
	const budget = 3 << 20
	f := &fixture{s: s, env: s.Env(), store: "s3://store/pinfs", data: map[string][]byte{}, work: t.TempDir()}
	for i := range 5 {
		name := fmt.Sprintf("m%d.bin", i)
		f.data[name] = randomBytes(t, 2<<20+100<<10)
		s.Put(t, "data", "ds/"+name, f.data[name])
	}
	f.digest = mustPinfs(t, f.env, "pin", "s3://data/ds/", "--store", f.store).lastLine()
	cache, limit := filepath.Join(f.work, "cache"), []string{"--cache-disk", strconv.Itoa(budget)}
	const held = "m0.bin"
	p := f.warmMember(t, cache, held, limit...)

	a, _ := f.mountPT(t, cache, filepath.Join(f.work, "a.jsonl"), limit...)
	half := len(f.data[held]) / 2
	child := openInChild(t, filepath.Join(a, held), half)
	if got, err := child.next(t); err != nil || !bytes.Equal(got, f.data[held][:half]) {
		t.Fatalf("the first half of %s through the open of mount a: %d bytes, %v", held, len(got), err)
	}
	if _, pt := ptStatus(t, a); pt.Opens != 1 {
		t.Fatalf("mount a did not serve %s by passthrough: %+v", held, pt)
	}

	b, db := f.mount(t, cache, filepath.Join(f.work, "b.jsonl"), limit...)
	for _, name := range []string{"m1.bin", "m2.bin"} {
		f.readWant(t, b, name)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mount b did not evict %s (%s) within 20s of reading two members over the budget", held, p)
		}
	}
	if got, err := child.rest(t); err != nil || !bytes.Equal(got, f.data[held][half:]) {
		t.Fatalf("the rest of %s through the same open of mount a, after its file was evicted: %d bytes, %v", held, len(got), err)
	}
	if st, pt := ptStatus(t, a); pt.Opens != 1 || st.BytesServed != 0 {
		t.Errorf("mount a: passthrough %+v, bytes_served %d; want its one open served by the kernel alone", pt, st.BytesServed)
	}

	db.stop(t, 10*time.Second) // its write-behind is flushed
	bytesHeld, parts := heldBytes(t, cache)
	t.Logf("the shared cache dir holds %d bytes (%d partial files), budget %d", bytesHeld, parts, budget)
	if bytesHeld > budget+int64(parts)*4096 {
		t.Errorf("the shared cache dir holds %d bytes, budget %d", bytesHeld, budget)
	}
	if bytesHeld < budget/2 {
		t.Errorf("the shared cache dir holds only %d bytes: the disk tier does not cache", bytesHeld)
	}
}

// heldBytes returns the bytes the disk tier under cache holds: the size
// of each whole-member file, the allocated bytes of each partial one
// (sparse, with its record of blocks past the data), and how many partial
// files there are.
func heldBytes(t testing.TB, cache string) (n int64, parts int) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(cache, "blocks"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if strings.HasSuffix(d.Name(), ".part") {
			parts++
			n += fi.Sys().(*syscall.Stat_t).Blocks * 512
		} else {
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n, parts
}
