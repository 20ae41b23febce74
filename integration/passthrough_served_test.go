package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pinfs/pinfs/verify/b3"
)

// TestPassthroughServesWarmedMember is issue 25's acceptance on a real
// mount as root: a warmed member is served by passthrough with exact
// bytes (status counts the open, the record marks the member), and its
// cache file written in place after that verification, still 0400, is
// caught at the next open: verified again, removed, recorded as a
// mismatch from disk, and the right bytes served.
func TestPassthroughServesWarmedMember(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("passthrough needs root")
	}
	f := pinFixture(t)
	const rel = "train/big.bin"
	cache, record := filepath.Join(f.work, "cache"), filepath.Join(f.work, "run.jsonl")
	f.warm(t, cache)
	dir, d := f.mount(t, cache, record, "--flush-interval", "1h")
	if b, err := readFile(t, filepath.Join(dir, rel)); err != nil || !bytes.Equal(b, f.data[rel]) {
		t.Fatalf("%s: %d bytes, %v", rel, len(b), err)
	}
	var st passthroughStatus
	if err := json.Unmarshal([]byte(mustPinfs(t, f.env, "status", dir, "--json").stdout), &st); err != nil {
		t.Fatal(err)
	}
	if p := st.Passthrough; p == nil || !p.Enabled || p.Opens != 1 {
		t.Fatalf("status passthrough %+v, want on with 1 open", p)
	}

	h := b3.Of(f.data[rel]).Hex()
	p := filepath.Join(cache, "blocks", h[:2], h)
	w, err := os.OpenFile(p, os.O_WRONLY, 0) // root: mode 0400 does not stop it
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.WriteAt([]byte{f.data[rel][2<<20+5] ^ 1}, 2<<20+5)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	waitNotOpenIn(t, d.cmd.Process.Pid, p) // the first open's backing file lingers a second
	if b, err := readFile(t, filepath.Join(dir, rel)); err != nil || !bytes.Equal(b, f.data[rel]) {
		t.Fatalf("%s after its cache file changed: %d bytes, %v", rel, len(b), err)
	}
	d.stop(t, 30*time.Second)

	var fromDisk int
	for _, e := range events(t, record, "mismatch") {
		if e["from"] == "disk" {
			fromDisk++
		}
	}
	if fromDisk != 1 {
		t.Errorf("%d mismatch events from disk, want 1 for the changed cache file", fromDisk)
	}
	ends := events(t, record, "run_end")
	if len(ends) != 1 {
		t.Fatalf("%d run_end events", len(ends))
	}
	if n, _ := ends[0]["totals"].(map[string]any)["passthrough_opens"].(float64); n != 1 {
		t.Errorf("run_end totals %v, want 1 passthrough open (the second open is served through the daemon)", ends[0]["totals"])
	}
	if b, err := os.ReadFile(p); err == nil && !bytes.Equal(b, f.data[rel]) {
		t.Error("the changed cache file is still there")
	}
}

// waitNotOpenIn waits, at most 30 s, until process pid has no descriptor
// open on path (its /proc/PID/fd links).
func waitNotOpenIn(t *testing.T, pid int, path string) {
	t.Helper()
	fds := fmt.Sprintf("/proc/%d/fd", pid)
	start := time.Now()
	for deadline := start.Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		ents, err := os.ReadDir(fds)
		if err != nil {
			t.Fatal(err)
		}
		open := false
		for _, e := range ents {
			if l, _ := os.Readlink(filepath.Join(fds, e.Name())); l == path {
				open = true
			}
		}
		if !open {
			t.Logf("pid %d closed %s after %v", pid, path, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still has %s open after 30 s", pid, path)
		}
	}
}
