package integration

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTierStoppedMidRead: nginx stops while two mounts have the big member
// open and have read its first block. The mount without a fallback fails
// the next read with EIO within its --read-timeout and writes a
// fetch_failed event; the one with --fallback-store (the origin's store)
// reads the rest, verified, from there.
func TestTierStoppedMidRead(t *testing.T) {
	f := newTierFixture(t)
	const readTimeout = 3 * time.Second
	flags := []string{"--read-timeout", readTimeout.String(), "--stall-timeout", "1s", "--readahead-max", "0"}
	plain, record := f.mountTier(t, flags...)
	withFB, fbRecord := f.mountTier(t, append(flags, "--fallback-store", f.store)...)
	want, err := os.ReadFile(filepath.Join(f.src, "big"))
	if err != nil {
		t.Fatal(err)
	}
	open := func(dir string) *os.File {
		fh, err := os.Open(filepath.Join(dir, "big"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fh.Close() })
		b := make([]byte, 4096)
		if _, err := fh.ReadAt(b, 0); err != nil || !bytes.Equal(b, want[:4096]) {
			t.Fatalf("%s: first read before the tier stops: %v", dir, err)
		}
		return fh
	}
	pf, ff := open(plain), open(withFB)
	f.stopTier()

	const at = 4 << 20
	b := make([]byte, 1<<20)
	start := time.Now()
	_, err = pf.ReadAt(b, at)
	took := time.Since(start)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("read after the tier stopped: %v, want EIO", err)
	}
	// README and docs/cluster.md: a tier that is down is EIO within
	// --read-timeout, and a read the kernel retries still fails within one
	// (the block's failure is remembered for 5 s).
	if took > readTimeout {
		t.Fatalf("EIO after %v, want it within --read-timeout %v", took, readTimeout)
	}
	t.Logf("EIO after %v (--read-timeout %v)", took.Round(time.Millisecond), readTimeout)
	if rec, _ := os.ReadFile(record); !strings.Contains(string(rec), `"event":"fetch_failed"`) {
		t.Fatalf("no fetch_failed event in the run record:\n%s", rec)
	}

	n, err := ff.ReadAt(b, at)
	if err != nil || !bytes.Equal(b[:n], want[at:at+n]) || n != len(b) {
		t.Fatalf("read through --fallback-store after the tier stopped: %d bytes, %v", n, err)
	}
	rest, err := os.ReadFile(filepath.Join(withFB, "big"))
	if err != nil || !bytes.Equal(rest, want) {
		t.Fatalf("whole member through --fallback-store: %v", err)
	}
	if rec, _ := os.ReadFile(fbRecord); strings.Contains(string(rec), `"event":"fetch_failed"`) {
		t.Fatalf("the mount with a fallback recorded a fetch_failed:\n%s", rec)
	}
}
