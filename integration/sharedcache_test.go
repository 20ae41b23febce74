package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/fusetest"
	"github.com/pinfs/pinfs/integration/s3test"
	"github.com/pinfs/pinfs/verify/b3"
)

// Two mounts sharing one --cache-dir hold its disk tier to --cache-disk
// together, and one serves the blocks the other cached.
func TestSharedCacheDirHoldsTheBudget(t *testing.T) {
	t.Parallel()
	fusetest.Require(t)
	s := s3test.Start(t)
	env := s.Env()
	s.CreateBucket(t, "data", true)
	s.CreateBucket(t, "store", true)
	// Six members of two blocks each (1 MiB + 100 KiB): 6.6 MiB in all,
	// read half by each mount, against a budget of 3 MiB.
	const budget = 3 << 20
	data := map[string][]byte{}
	for i := range 6 {
		name := fmt.Sprintf("m%d.bin", i)
		data[name] = randomBytes(t, 1<<20+100<<10)
		s.Put(t, "data", "ds/"+name, data[name])
	}
	digest := mustPinfs(t, env, "pin", "s3://data/ds/", "--store", "s3://store/pinfs").lastLine()

	work := t.TempDir()
	cache := filepath.Join(work, "cache")
	mount := func(name string) (string, *daemon, string) {
		dir := filepath.Join(work, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		record := filepath.Join(work, name+".jsonl")
		d := startMount(t, env, dir, digest, dir, "--store", "s3://store/pinfs", "--cache-dir", cache,
			"--cache-disk", strconv.Itoa(budget), "--run-record", record)
		return dir, d, record
	}
	read := func(dir, name string) {
		t.Helper()
		if b, err := readFile(t, filepath.Join(dir, name)); err != nil || !bytes.Equal(b, data[name]) {
			t.Fatalf("%s in %s: %v", name, dir, err)
		}
	}
	a, _, _ := mount("a")
	b, db, recordB := mount("b")

	for i := range 3 {
		read(a, fmt.Sprintf("m%d.bin", i))
	}
	// The disk tier writes a block after serving it: wait for m2's
	// whole-member file, made when its last block is written.
	h := b3.Of(data["m2.bin"]).Hex()
	last := filepath.Join(cache, "blocks", h[:2], h)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(last); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mount a did not cache %s", last)
		}
	}
	read(b, "m2.bin") // from the blocks a cached
	for i := 3; i < 6; i++ {
		read(b, fmt.Sprintf("m%d.bin", i))
	}
	db.stop(t, 10*time.Second)

	ends := events(t, recordB, "run_end")
	if len(ends) != 1 {
		t.Fatalf("%d run_end events in b's record", len(ends))
	}
	// As root, b hands m2's whole-member file to the kernel (passthrough)
	// instead of reading its blocks: either is serving what a cached.
	totals := ends[0]["totals"].(map[string]any)
	hits, _ := totals["disk_hits"].(float64)
	pt, _ := totals["passthrough_opens"].(float64)
	if hits+pt < 1 {
		t.Errorf("mount b had %v: no disk hit or passthrough open reading a member mount a had cached", totals)
	}
	// Every block written has been written (b has stopped; a's last Put
	// came before b's reads).
	// A listing counts the bytes the member files hold (a partial file is
	// sparse: its length is not what it holds).
	disk, err := cacheDisk(filepath.Join(cache, "blocks"))
	if err != nil {
		t.Fatal(err)
	}
	files := disk.Stats().Bytes
	disk.Close()
	out, err := exec.Command("du", "-s", "--block-size=1", filepath.Join(cache, "blocks")).Output()
	if err != nil {
		t.Fatal(err)
	}
	du, err := strconv.ParseInt(strings.Fields(string(out))[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// du also counts the directories themselves (4 KiB each, at most 7
	// here: blocks/ and one per member file) and a partial file's trailer
	// (a block of the file system each, at most 6).
	t.Logf("member files hold %d bytes, du %d, budget %d", files, du, budget)
	if files > budget || du > budget+13*4096 {
		t.Fatalf("shared cache dir holds %d bytes of blocks (du %d), budget %d", files, du, budget)
	}
	if files < budget/2 {
		t.Fatalf("shared cache dir holds only %d bytes: the disk tier does not cache", files)
	}
}
