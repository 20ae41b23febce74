package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mountStatus is pinfs status MOUNTPOINT --json as scripts read it.
type mountStatus struct {
	Mountpoint      string    `json:"mountpoint"`
	Serving         *bool     `json:"serving"`
	Error           string    `json:"error"`
	Digest          string    `json:"digest"`
	RunID           string    `json:"run_id"`
	PID             int       `json:"pid"`
	Started         time.Time `json:"started"`
	UptimeSeconds   float64   `json:"uptime_seconds"`
	Store           string    `json:"store"`
	CacheDir        string    `json:"cache_dir"`
	Members         int       `json:"members"`
	MembersOpened   int64     `json:"members_opened"`
	BytesServed     int64     `json:"bytes_served"`
	NetworkFetches  int64     `json:"network_fetches"`
	CacheHits       struct{ Memory, Disk int64 }
	IntegrityEvents struct {
		Mismatch       int64 `json:"mismatch"`
		VersionMissing int64 `json:"version_missing"`
		FetchFailed    int64 `json:"fetch_failed"`
		Total          int64 `json:"total"`
	} `json:"integrity_events"`
}

// statusJSON runs pinfs status dir --json, wants exit code, and decodes
// its stdout, which --json prints whether the mount serves or not.
func statusJSON(t testing.TB, code int, dir string) (mountStatus, result) {
	t.Helper()
	r := pinfs(t, nil, "status", dir, "--json")
	var st mountStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("pinfs status %s --json: stdout is not a status: %v\n%v", dir, err, r)
	}
	if r.code != code || st.Serving == nil || *st.Serving != (code == 0) || st.Mountpoint != dir {
		t.Fatalf("pinfs status %s --json: want exit %d and serving %t at %s, got %+v\n%v", dir, code, code == 0, dir, st, r)
	}
	return st, r
}

// wantNotServing checks that pinfs status dir, in text and JSON, exits 1
// with msg as its only line on stderr and, with --json, as the error.
func wantNotServing(t testing.TB, dir, msg string) {
	t.Helper()
	r := pinfs(t, nil, "status", dir)
	if r.code != 1 || r.stdout != "" || r.stderr != "pinfs status: "+msg+"\n" {
		t.Errorf("pinfs status %s: want exit 1 and %q on stderr, got %v", dir, msg, r)
	}
	st, r := statusJSON(t, 1, dir)
	if st.Error != msg || st.Digest != "" || r.stderr != "pinfs status: "+msg+"\n" {
		t.Errorf("pinfs status %s --json: want error %q, got %+v\n%v", dir, msg, st, r)
	}
}

// runIDOf returns the run id the daemon printed when it started serving.
func runIDOf(t testing.TB, d *daemon) string {
	t.Helper()
	b, _ := os.ReadFile(d.log)
	m := regexp.MustCompile(`(?m)^run (\S+) serving `).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no run id in the mount's output:\n%s", b)
	}
	return string(m[1])
}

func TestStatusOfALiveMount(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	cache := filepath.Join(f.work, "cache")
	dir, d := f.mount(t, cache, filepath.Join(f.work, "run.jsonl"))
	runID := runIDOf(t, d)

	before, _ := statusJSON(t, 0, dir)
	if before.Digest != f.digest || before.RunID != runID || before.PID != d.cmd.Process.Pid ||
		before.Store != f.store || before.CacheDir != cache || before.Members != len(f.data) ||
		before.Started.IsZero() || before.UptimeSeconds < 0 || before.Error != "" {
		t.Fatalf("status of the mount of %s run %s pid %d: %+v", f.digest, runID, d.cmd.Process.Pid, before)
	}

	const rel = "train/mid.bin"
	if b, err := readFile(t, filepath.Join(dir, rel)); err != nil || !bytes.Equal(b, f.data[rel]) {
		t.Fatalf("read %s: %v", rel, err)
	}
	after, _ := statusJSON(t, 0, dir)
	if after.MembersOpened != before.MembersOpened+1 || after.BytesServed < before.BytesServed+int64(len(f.data[rel])) ||
		after.NetworkFetches <= before.NetworkFetches || after.UptimeSeconds < before.UptimeSeconds || after.RunID != runID {
		t.Errorf("after reading %s (%d bytes): %+v\nbefore: %+v", rel, len(f.data[rel]), after, before)
	}
	if after.IntegrityEvents.Total != 0 {
		t.Errorf("integrity events on a clean store: %+v", after.IntegrityEvents)
	}

	// The text says the same, for a person.
	r := mustPinfs(t, nil, "status", dir)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	head := fmt.Sprintf("%s serving %s run %s pid %d up ", dir, f.digest, runID, d.cmd.Process.Pid)
	counts := fmt.Sprintf("  members %d/%d opened, %d bytes served", after.MembersOpened, after.Members, after.BytesServed)
	if len(lines) != 7 || !strings.HasPrefix(lines[0], head) || lines[1] != counts ||
		lines[3] != "  integrity events: 0 (mismatch 0, version_missing 0, fetch_failed 0)" ||
		!strings.HasPrefix(lines[4], "  passthrough ") || !strings.HasPrefix(lines[5], "  pool: ") ||
		!strings.HasPrefix(lines[6], "  pinfs ") || r.stderr != "" {
		t.Errorf("text status: want %q… and %q, got %v", head, counts, r)
	}

	// A directory inside the mount is not the mount.
	wantNotServing(t, filepath.Join(dir, "train"), filepath.Join(dir, "train")+" is not a pinfs mount")
}

func TestStatusOfADeadMount(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	dir, d := f.mount(t, filepath.Join(f.work, "cache"), filepath.Join(f.work, "run.jsonl"))
	statusJSON(t, 0, dir)
	d.cmd.Process.Kill()
	d.exitCode(t, 10*time.Second)

	wantNotServing(t, dir, dir+": the pinfs daemon is gone (transport endpoint is not connected); "+
		"remove the dead mount with pinfs unmount "+dir)
	// The advice works.
	mustPinfs(t, nil, "unmount", dir)
	wantNotServing(t, dir, dir+" is not a pinfs mount")
}

func TestStatusOfPathsThatAreNotMounts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wantNotServing(t, dir, dir+" is not a pinfs mount")
	missing := filepath.Join(dir, "missing")
	wantNotServing(t, missing, missing+" does not exist")
}

// TestStatusCountsIntegrityEvents: a member whose pinned version was
// changed at rest fails its read, and the mount, still serving, counts the
// mismatch.
func TestStatusCountsIntegrityEvents(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	flip(t, f.s.VersionPath(t, "data", "ds/train/big.bin", f.vers["train/big.bin"]), 2<<20+5)
	record := filepath.Join(f.work, "run.jsonl")
	dir, _ := f.mount(t, filepath.Join(f.work, "cache"), record)
	if st, _ := statusJSON(t, 0, dir); st.IntegrityEvents.Total != 0 {
		t.Fatalf("integrity events before any read: %+v", st.IntegrityEvents)
	}
	wantEIO(t, filepath.Join(dir, "train/big.bin"))

	st, _ := statusJSON(t, 0, dir)
	in := st.IntegrityEvents
	if in.Mismatch < 1 || in.Total != in.Mismatch+in.VersionMissing+in.FetchFailed {
		t.Fatalf("integrity events after a read of a tampered member: %+v", in)
	}
	if n := int64(len(events(t, record, "mismatch"))); n < 1 || in.Mismatch < n {
		t.Errorf("%d mismatch events in the run record, status counts %d", n, in.Mismatch)
	}
	r := mustPinfs(t, nil, "status", dir)
	want := fmt.Sprintf("  integrity events: %d (mismatch %d, version_missing %d, fetch_failed %d)\n",
		in.Total, in.Mismatch, in.VersionMissing, in.FetchFailed)
	if !strings.Contains(r.stdout, want) {
		t.Errorf("text status lacks %q: %v", want, r)
	}
}

// TestStatusOfAHungDaemon: a daemon that does not answer (stopped) does
// not hang pinfs status: it gives up after --timeout with exit 1, no
// sooner and not much later.
func TestStatusOfAHungDaemon(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	dir, d := f.mount(t, filepath.Join(f.work, "cache"), filepath.Join(f.work, "run.jsonl"))
	statusJSON(t, 0, dir)
	if err := d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.cmd.Process.Signal(syscall.SIGCONT) }) // before the mount's cleanup stops it

	// --timeout 1s answers well within 4 s (a query bound of its own, such
	// as 5 s, would not); --timeout 2.5s waits at least that long (one
	// shorter than the flag would not).
	for _, c := range []struct {
		timeout  string
		min, max time.Duration
	}{
		{"1s", time.Second, 4 * time.Second},
		{"2.5s", 2500 * time.Millisecond, 2 * time.Minute},
	} {
		start := time.Now()
		r := pinfs(t, nil, "status", dir, "--timeout", c.timeout)
		elapsed := time.Since(start)
		want := "pinfs status: " + dir + ": the pinfs daemon did not answer within "
		if r.code != 1 || r.stdout != "" || !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("status --timeout %s of a stopped daemon: want exit 1 and %q…, got %v", c.timeout, want, r)
		}
		if elapsed < c.min || elapsed > c.max {
			t.Errorf("status --timeout %s of a stopped daemon answered after %v, want between %v and %v",
				c.timeout, elapsed.Round(time.Millisecond), c.min, c.max)
		}
	}
}
