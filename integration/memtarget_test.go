package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/fusetest"
)

// The acceptance's concurrency test (issue 38): memTargetReaders readers
// at once, each of its own member, through one mount whose memory target
// is far below what their readahead windows would take without one
// (64 × the 128 MiB window is 8 GiB).
const (
	memTargetReaders = 64
	memTargetMember  = 8 << 20
	memTarget        = 256 << 20
	memTargetFlag    = "256MiB"
	memTargetWait    = 10 * time.Minute // every reader done, bounded
)

// memberStream is the content of member i: a deterministic random stream,
// so that the source is written and every byte read back is checked
// without holding 512 MiB in the test.
func memberStream(i int) io.Reader {
	var seed [32]byte
	copy(seed[:], fmt.Sprintf("memtarget member %d", i))
	return io.LimitReader(rand.NewChaCha8(seed), memTargetMember)
}

// TestMemoryTargetManyReaders mounts a local store of memTargetReaders
// members with --memory-target memTargetFlag, reads every member whole at
// once (1 MiB reads, as a loader does), compares every byte with the
// source, and checks that the daemon's peak resident memory (VmHWM)
// stayed at most the target, and that the daemon sized its pool from the
// flag (the "memory" log line, pinfs status's pool).
func TestMemoryTargetManyReaders(t *testing.T) {
	fusetest.Require(t)
	t.Parallel()
	work := t.TempDir()
	src := filepath.Join(work, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range memTargetReaders {
		f, err := os.Create(filepath.Join(src, fmt.Sprintf("shard-%02d.bin", i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, memberStream(i)); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	store := filepath.Join(work, "store")
	digest := mustPinfs(t, nil, "pin", src, "--store", store).lastLine()
	mnt := filepath.Join(work, "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	// The race detector's shadow memory grows with what the daemon
	// touches (a race-built daemon peaked at 286 MiB under a 256 MiB
	// target, 536 under 512): the bound is the product's, so this mount
	// runs a plain build.
	d := startMountBin(t, plainPinfs(t), os.Environ(), mnt, digest, mnt, "--store", store, "--cache-dir", filepath.Join(work, "cache"),
		"--run-record", filepath.Join(work, "record.jsonl"), "--memory-target", memTargetFlag)
	pid := d.cmd.Process.Pid
	idle := status(t, pid, "VmHWM")
	logged, _ := os.ReadFile(d.log)
	if !strings.Contains(string(logged), fmt.Sprintf("target=%d source=flag", memTarget)) {
		t.Errorf("the daemon's log has no memory line with target=%d source=flag:\n%s", memTarget, logged)
	}
	slots := poolSlots(t, mnt)
	if slots <= 0 || slots<<20 > memTarget {
		t.Errorf("the mount's pool has %d slots of 1 MiB; want some, within the %s target", slots, memTargetFlag)
	}

	errs := make([]error, memTargetReaders)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range memTargetReaders {
		wg.Go(func() {
			<-start
			errs[i] = readAndCompare(filepath.Join(mnt, fmt.Sprintf("shard-%02d.bin", i)), memberStream(i))
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	close(start)
	select {
	case <-done:
	case <-time.After(memTargetWait):
		t.Fatalf("%d readers not done after %v", memTargetReaders, memTargetWait)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	peak := status(t, pid, "VmHWM")
	t.Logf("%d readers of %d MiB members, --memory-target %s: daemon VmHWM %d MiB (%d MiB once mounted), pool %d slots",
		memTargetReaders, memTargetMember>>20, memTargetFlag, peak>>20, idle>>20, slots)
	if peak > memTarget {
		t.Errorf("the daemon's peak resident memory %d MiB is above its --memory-target %s", peak>>20, memTargetFlag)
	}
}

// readAndCompare reads the file at p whole in 1 MiB reads and compares it
// with want, byte for byte.
func readAndCompare(p string, want io.Reader) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	got, exp := make([]byte, 1<<20), make([]byte, 1<<20)
	var off int64
	for {
		n, err := io.ReadFull(f, got)
		if n > 0 {
			if _, werr := io.ReadFull(want, exp[:n]); werr != nil {
				return fmt.Errorf("%s: longer than its source: %d bytes or more", p, off+int64(n))
			}
			if i := firstDifference(got[:n], exp[:n]); i >= 0 {
				return fmt.Errorf("%s: byte %d differs from the source", p, off+int64(i))
			}
			off += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s at %d: %w", p, off, err)
		}
	}
	if n, _ := io.Copy(io.Discard, want); n > 0 {
		return fmt.Errorf("%s: %d bytes, its source has %d more", p, off, n)
	}
	return nil
}

func firstDifference(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

// poolSlots returns the slots of the pool of the mount at mnt, as pinfs
// status --json reports them.
func poolSlots(t *testing.T, mnt string) int {
	t.Helper()
	r := mustPinfs(t, nil, "status", mnt, "--json")
	var st struct {
		Pool *struct {
			Slots int `json:"slots"`
		} `json:"pool"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("pinfs status --json: %v\n%s", err, r.stdout)
	}
	if st.Pool == nil {
		t.Fatalf("pinfs status --json has no pool:\n%s", r.stdout)
	}
	return st.Pool.Slots
}

var (
	plainOnce sync.Once
	plainBin  string
	plainErr  error
)

// plainPinfs returns a pinfs built without the race detector, built once
// for the tests that measure the daemon's memory.
func plainPinfs(t *testing.T) string {
	t.Helper()
	plainOnce.Do(func() {
		plainBin = filepath.Join(filepath.Dir(pinfsBin), "pinfs-plain")
		out, err := exec.Command("go", "build", "-o", plainBin, "../cmd/pinfs").CombinedOutput()
		if err != nil {
			plainErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if plainErr != nil {
		t.Fatal(plainErr)
	}
	return plainBin
}
