package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/integration/fusetest"
	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/verify/b3"
)

// TestRunEndTotalsAndConsumed reads known members of a mount and checks
// that run_end's totals and the consumed set (as pinfs run show reads it)
// say exactly that: on a cold cache every block comes from the network,
// on a remount with the same cache dir from the disk tier.
func TestRunEndTotalsAndConsumed(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	cache := filepath.Join(f.work, "cache")
	read := []string{"README", "train/big.bin", "val/v.txt"} // read whole
	opened := []string{"empty", "train/mid.bin"}             // opened, no byte read
	var bytesRead, blocksRead int64
	for _, p := range read {
		n := int64(len(f.data[p]))
		bytesRead += n
		blocksRead += (n + blocks.BlockSize - 1) / blocks.BlockSize
	}
	if blocksRead != 6 {
		t.Fatalf("fixture changed: %d blocks in %v", blocksRead, read)
	}

	for _, run := range []struct {
		name              string
		diskHits, fetches int64
	}{
		{name: "cold cache", fetches: blocksRead},
		{name: "remount, same cache dir", diskHits: blocksRead},
	} {
		record := filepath.Join(f.work, strings.ReplaceAll(run.name, " ", "_")+".jsonl")
		// The daemon's read path is what is counted here: a remount would
		// serve the cached members through passthrough, which it never sees.
		dir, d := f.mount(t, cache, record, "--metrics-addr", "127.0.0.1:0", "--passthrough=false")
		for _, p := range read {
			if got, err := readFile(t, filepath.Join(dir, p)); err != nil || !bytes.Equal(got, f.data[p]) {
				t.Fatalf("%s: %s: read %d bytes (%v), want the %d pinned bytes", run.name, p, len(got), err, len(f.data[p]))
			}
		}
		for _, p := range opened {
			if _, err := inMount(t, 30*time.Second, func() (struct{}, error) {
				fh, err := os.Open(filepath.Join(dir, p))
				if err == nil {
					fh.Close()
				}
				return struct{}{}, err
			}); err != nil {
				t.Fatal(err)
			}
		}
		// Memory hits depend on how the kernel splits buffered reads and
		// on readahead loads that end after the read: take them from the
		// mount's own counter once it has settled. Reads that bypass the
		// page cache are one request each, and each of these is one
		// memory hit: the last block of big.bin first, then backwards, so
		// that none looks sequential and starts readahead (whose load of
		// a block found in memory counts as a hit too).
		const hitsSeries = `pinfs_cache_hits_total\{[^}]*tier="memory"[^}]*\}`
		memHits := settled(t, d, hitsSeries)
		direct := []struct {
			path string
			off  int64
		}{{"README", 0}, {"train/big.bin", 3 * blocks.BlockSize}, {"train/big.bin", blocks.BlockSize + 4096}, {"train/big.bin", 0}}
		served := bytesRead
		for _, r := range direct {
			want := f.data[r.path][r.off:min(r.off+4096, int64(len(f.data[r.path])))]
			if got, _, err := directRead(t, filepath.Join(dir, r.path), r.off, 4096); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: O_DIRECT read of %s at %d: %d bytes (%v), want the %d pinned ones", run.name, r.path, r.off, len(got), err, len(want))
			}
			served += int64(len(want))
		}
		if got := scrape(t, d, hitsSeries); got != memHits+int64(len(direct)) {
			t.Errorf("%s: %d memory hits after %d reads of blocks in memory, want %d", run.name, got, len(direct), memHits+int64(len(direct)))
		}
		memHits += int64(len(direct))
		ids := map[string]string{}
		for _, p := range append(read, opened...) {
			ids[p] = xattr(t, filepath.Join(dir, p), "user.pinfs.id")
		}
		if log, _ := os.ReadFile(d.log); strings.Contains(string(log), "metrics and pprof are served on an address") {
			t.Errorf("%s: a loopback --metrics-addr was warned about:\n%s", run.name, log)
		}
		d.stop(t, 30*time.Second)
		if code := d.exitCode(t, time.Second); code != 0 {
			t.Fatalf("%s: exit %d", run.name, code)
		}

		all := events(t, record, "")
		if len(all) < 2 || all[len(all)-2]["event"] != "consumed" || all[len(all)-1]["event"] != "run_end" {
			t.Fatalf("%s: the run record does not end with consumed, run_end: %v", run.name, all)
		}
		totals, _ := all[len(all)-1]["totals"].(map[string]any)
		for k, want := range map[string]int64{
			"members_opened":  int64(len(read) + len(opened)),
			"bytes_served":    served,
			"blocks_verified": blocksRead,
			"mem_hits":        memHits,
			"disk_hits":       run.diskHits,
			"network_fetches": run.fetches,
			"mismatches":      0,
		} {
			if got, ok := totals[k].(float64); !ok || int64(got) != want {
				t.Errorf("%s: run_end totals %s = %v, want %d", run.name, k, totals[k], want)
			}
		}
		for _, e := range events(t, record, "consumed") {
			if s, _ := e["set"].(string); s == "" || e["members"] != nil {
				t.Errorf("%s: a consumed event without a compact set, or with the old members list: %v", run.name, e)
			}
		}

		// The consumed set, as pinfs run show reads it from the record: the
		// members read and the empty one in full, mid.bin opened but not
		// read, sorted by path.
		var rep struct {
			Consumed struct {
				MembersOpened int64 `json:"members_opened"`
				MembersFull   int64 `json:"members_full"`
				Bytes         int64 `json:"bytes"`
			} `json:"consumed"`
			Members []map[string]any `json:"members"`
		}
		out := mustPinfs(t, f.env, "run", "show", runID(t, record), "--run-record", record, "--cache-dir", cache, "--members", "--json").stdout
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%s: pinfs run show --json: %v\n%s", run.name, err, out)
		}
		if c := rep.Consumed; c.MembersOpened != int64(len(read)+len(opened)) || c.MembersFull != int64(len(read)+1) || c.Bytes != bytesRead {
			t.Errorf("%s: consumed %+v, want %d members opened, %d in full, %d bytes", run.name, c, len(read)+len(opened), len(read)+1, bytesRead)
		}
		var want []map[string]any
		for _, p := range []string{"README", "empty", "train/big.bin", "train/mid.bin", "val/v.txt"} {
			size := float64(len(f.data[p]))
			n, full := size, true
			if p == "train/mid.bin" {
				n, full = 0, false
			}
			want = append(want, map[string]any{"path": p, "id": ids[p], "digest": b3.Of(f.data[p]).String(),
				"version": f.vers[p], "size": size, "bytes": n, "full": full})
		}
		got := rep.Members
		slices.SortFunc(got, func(a, b map[string]any) int { return strings.Compare(fmt.Sprint(a["path"]), fmt.Sprint(b["path"])) })
		if len(got) != len(want) {
			t.Fatalf("%s: consumed %v, want %v", run.name, got, want)
		}
		for i, w := range want {
			for k, v := range w {
				if got[i][k] != v {
					t.Errorf("%s: consumed member %d %s = %v, want %v (%v)", run.name, i, k, got[i][k], v, got[i])
				}
			}
		}
	}
}

// scrape reads the value of the series matching re from the daemon's
// metrics; the daemon must have been started with --metrics-addr.
func scrape(t testing.TB, d *daemon, re string) int64 {
	t.Helper()
	log, _ := os.ReadFile(d.log)
	u := regexp.MustCompile(`url=(http://\S+/metrics)`).FindSubmatch(log)
	if u == nil {
		t.Fatalf("no metrics url in the mount log:\n%s", log)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(string(u[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + re + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("no series %s in the metrics:\n%s", re, body)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return int64(v)
}

// settled scrapes the series matching re until two scrapes 300 ms apart
// agree (at most 10 s) and returns the value.
func settled(t testing.TB, d *daemon, re string) int64 {
	t.Helper()
	v := scrape(t, d, re)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(300 * time.Millisecond)
		next := scrape(t, d, re)
		if next == v {
			return v
		}
		v = next
	}
	t.Fatalf("%s still changing after 10 s", re)
	return v
}

// xattr returns the extended attribute name of p.
func xattr(t testing.TB, p, name string) string {
	t.Helper()
	buf := make([]byte, 256)
	n, err := unix.Getxattr(p, name, buf)
	if err != nil {
		t.Fatalf("getxattr %s %s: %v", p, name, err)
	}
	return string(buf[:n])
}

// nobody is the user a trainer container beside a sidecar runs as here.
const nobody = 65534

// asNobody runs the command args as uid and gid nobody, bounded in time,
// and returns its stdout, its stderr and its error.
func asNobody(t testing.TB, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, NoSetGroups: true}}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// publicDir returns a new empty directory that every user can reach: the
// temporary directories of the test are 0700.
func publicDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != filepath.Dir(d) && strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestMountOwnerAndAllowOther is the sidecar case: a root daemon serves
// files owned by the trainer's user, who can read them only with
// --allow-other.
func TestMountOwnerAndAllowOther(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	id := strconv.Itoa(nobody)
	mount := func(extra ...string) (string, *daemon) {
		dir := filepath.Join(publicDir(t), "mnt")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		args := append([]string{f.digest, dir, "--store", f.store, "--cache-dir", filepath.Join(f.work, "cache"),
			"--run-record", filepath.Join(f.work, "run.jsonl"), "--uid", id, "--gid", id}, extra...)
		return dir, startMount(t, f.env, dir, args...)
	}

	dir, d := mount("--allow-other", "--metrics-addr", "0.0.0.0:0")
	for rel, mode := range map[string]os.FileMode{".": 0o555, "train": 0o555, "train/shards": 0o555, "train/mid.bin": 0o444, "empty": 0o444} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(dir, rel), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != nobody || st.Gid != nobody || os.FileMode(st.Mode).Perm() != mode {
			t.Errorf("%s: owner %d:%d mode %o, want %d:%d %o", rel, st.Uid, st.Gid, st.Mode&0o777, nobody, nobody, mode)
		}
	}
	for _, rel := range []string{"train/mid.bin", "README"} {
		out, errOut, err := asNobody(t, "cat", filepath.Join(dir, rel))
		if err != nil || out != string(f.data[rel]) {
			t.Errorf("uid %d reading %s with --allow-other: %v %s (%d bytes, want %d)", nobody, rel, err, errOut, len(out), len(f.data[rel]))
		}
	}
	// A sidecar may well publish its metrics to the pod: pinfs says what
	// that exposes.
	if log, _ := os.ReadFile(d.log); !strings.Contains(string(log), "level=WARN msg=\"metrics and pprof are served on an address") {
		t.Errorf("--metrics-addr 0.0.0.0:0 was not warned about:\n%s", log)
	}

	dir, _ = mount()
	if _, errOut, err := asNobody(t, "stat", "-c", "%u", filepath.Dir(dir)); err != nil {
		t.Fatalf("uid %d cannot reach the mountpoint's directory, the check below would prove nothing: %v %s", nobody, err, errOut)
	}
	_, errOut, err := asNobody(t, "cat", filepath.Join(dir, "README"))
	if err == nil || !strings.Contains(errOut, "Permission denied") { // strerror(EACCES)
		t.Errorf("uid %d reading a file of a mount without --allow-other: %v %q, want EACCES", nobody, err, errOut)
	}
	if got, err := readFile(t, filepath.Join(dir, "README")); err != nil || !bytes.Equal(got, f.data["README"]) {
		t.Errorf("the mounting user cannot read the mount without --allow-other: %v", err)
	}
}

// runEnded reports whether the record's last event is the run_end of
// runID.
func runEnded(t testing.TB, record, runID string) bool {
	all := events(t, record, "")
	return len(all) > 0 && all[len(all)-1]["event"] == "run_end" && all[len(all)-1]["run_id"] == runID
}

// runID returns the run id of the record's one run_start.
func runID(t testing.TB, record string) string {
	t.Helper()
	starts := events(t, record, "run_start")
	if len(starts) != 1 {
		t.Fatalf("%d run_start events in %s", len(starts), record)
	}
	return starts[0]["run_id"].(string)
}

func TestSIGINTEndsTheRun(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	record := filepath.Join(f.work, "run.jsonl")
	dir, d := f.mount(t, filepath.Join(f.work, "cache"), record)
	if got, err := readFile(t, filepath.Join(dir, "val/v.txt")); err != nil || !bytes.Equal(got, f.data["val/v.txt"]) {
		t.Fatalf("read: %v", err)
	}
	if err := d.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := d.exitCode(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGINT", code)
	}
	if !runEnded(t, record, runID(t, record)) {
		t.Errorf("the run record does not end with run_end after SIGINT: %v", events(t, record, ""))
	}
	if got := events(t, record, "consumed"); len(got) == 0 {
		t.Error("no consumed set after SIGINT")
	}
	if fusetest.Mounted(dir) {
		t.Error("still mounted after SIGINT")
	}
}

// TestLazyUnmountOfBusyMount: pinfs unmount refuses a mount with an open
// file, --lazy detaches it at once, the open file still reads, and the
// daemon ends the run once the file is closed.
func TestLazyUnmountOfBusyMount(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	record := filepath.Join(f.work, "run.jsonl")
	dir, d := f.mount(t, filepath.Join(f.work, "cache"), record)
	want := f.data["train/mid.bin"]
	fh, err := inMount(t, 30*time.Second, func() (*os.File, error) { return os.Open(filepath.Join(dir, "train/mid.bin")) })
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			fh.Close()
		}
	})
	readAt := func(off int64) {
		t.Helper()
		buf := make([]byte, 1000)
		n, err := inMount(t, 30*time.Second, func() (int, error) { return fh.ReadAt(buf, off) })
		if err != nil || !bytes.Equal(buf[:n], want[off:off+1000]) {
			t.Fatalf("read at %d: %d bytes (%v), want the pinned ones", off, n, err)
		}
	}
	readAt(0)

	wantExit(t, f.env, 1, []string{"busy"}, "unmount", dir)
	if !fusetest.Mounted(dir) {
		t.Fatal("pinfs unmount without --lazy removed a busy mount")
	}
	mustPinfs(t, f.env, "unmount", "--lazy", dir)
	if fusetest.Mounted(dir) {
		t.Fatal("still mounted at the mountpoint after pinfs unmount --lazy")
	}
	time.Sleep(500 * time.Millisecond) // the daemon would end now if the detach ended it
	select {
	case <-d.exited:
		t.Fatalf("the daemon exited (%v) while a file of the detached mount was open", d.err)
	default:
	}
	readAt(100_000) // served by the daemon, through the detached mount

	closed = true
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	if code := d.exitCode(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d after the last file of a lazily unmounted mount was closed", code)
	}
	if !runEnded(t, record, runID(t, record)) {
		t.Errorf("the run record does not end with run_end: %v", events(t, record, ""))
	}
}
