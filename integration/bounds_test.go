package integration

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunCommandsRefuseAFIFORecord: a FIFO at --run-record makes run list
// and run show fail at once with one line saying so, instead of waiting
// for a writer forever (issue 22, item 8).
func TestRunCommandsRefuseAFIFORecord(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "runs.jsonl")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"run", "list"}, {"run", "show", "r1"}} {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		r := runCmd(t, exec.CommandContext(ctx, pinfsBin, append(args, "--run-record", p)...))
		timedOut := ctx.Err() == context.DeadlineExceeded
		cancel()
		if timedOut {
			t.Fatalf("pinfs %s on a FIFO record blocked for 20 s", strings.Join(args, " "))
		}
		if r.code != 1 || !strings.Contains(r.stderr, "FIFO") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("pinfs %s on a FIFO record: %v; want exit 1 and one line naming the FIFO", strings.Join(args, " "), r)
		}
	}
}

// TestRunShowRefusesAConsumedBomb: a consumed event of about a kilobyte
// that names four million members of a seven-member snapshot is refused by
// run show (exit 1, one line), which no longer decodes it into a million
// bitmaps first (issue 22, item 4).
func TestRunShowRefusesAConsumedBomb(t *testing.T) {
	// Not t.Parallel: it bounds run show's peak memory, which the load of
	// tests beside it would raise (281 MiB once, against 126-144 alone).
	c := newRunsCase(t, func(f *fixture) string { return filepath.Join(f.work, "runs.jsonl") })
	// The binary form: no member only opened, none read in full, members
	// 0..2^22-1 read in part, each in granule 0 (see docs/mount.md).
	bin := []byte{0, 0, 1, 0, 0xff, 0xff, 0xff, 0x01}
	bin = append(bin, bytes.Repeat([]byte{1, 0, 0}, 1<<22)...)
	var z bytes.Buffer
	w, _ := flate.NewWriter(&z, flate.BestCompression)
	w.Write(bin)
	w.Close()
	t0 := time.Now().UTC().Add(-time.Hour)
	var record []byte
	for i, e := range []map[string]any{
		{"event": "run_start", "host": "elsewhere", "pid": 1},
		{"event": "consumed", "host": "elsewhere", "pid": 1, "set": "c1." + base64.RawURLEncoding.EncodeToString(z.Bytes())},
	} {
		e["time"], e["run_id"], e["digest"], e["seq"] = t0.Add(time.Duration(i)*time.Second), "bomb", c.f.digest, i+1
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		record = append(append(record, line...), '\n')
	}
	if err := os.WriteFile(c.record, record, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, pinfsBin, "run", "show", "bomb", "--store", c.f.store, "--run-record", c.record, "--cache-dir", c.cache)
	cmd.Env = append(os.Environ(), c.f.env...)
	r := runCmd(t, cmd)
	if r.code != 1 || !strings.Contains(r.stderr, "the table's 7 members") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("run show of a %d-byte record naming 2^22 members: %v; want exit 1 and one line naming the table's 7 members", len(record), r)
	}
	// What it refused never grew the heap: the process stayed about as
	// small as any run show of this snapshot (tens of MB, with -race).
	if rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10; rss > 256<<20 {
		t.Fatalf("run show peaked at %d MiB refusing a %d-byte record; want it refused before decoding (under 256 MiB)", rss>>20, len(record))
	}
	t.Logf("refused with %d MiB peak: %s", cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss>>10, strings.TrimSpace(r.stderr))
}
