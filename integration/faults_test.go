package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/integration/faultproxy"
	"github.com/pinfs/pinfs/integration/fusetest"
	"github.com/pinfs/pinfs/integration/s3test"
	"github.com/pinfs/pinfs/store/cache/cachetest"
)

// The fault suite's timeouts: short, so that the suite stays quick, and
// the margin the busy test machine gets on top of every time bound.
const (
	faultReadTimeout  = 5 * time.Second
	faultStallTimeout = 2 * time.Second
	faultMargin       = 5 * time.Second
	// directBound bounds a fail-closed O_DIRECT read: the read timeout.
	directBound = faultReadTimeout + faultMargin
	// failBound bounds a fail-closed buffered read: the read timeout too,
	// since the kernel's second read of a page whose read failed fails at
	// once (the block reader remembers the failure for a few seconds).
	failBound = directBound
	// fastBound bounds a failure that needs no retry (403).
	fastBound = 5 * time.Second
	mib       = 1 << 20
)

// faultFixture is one versitygw, one pinned snapshot and one fault proxy,
// shared by the cases of TestFaults; each case mounts afresh (its own
// cache dir and run record) through the proxy.
type faultFixture struct {
	s      *s3test.Server
	p      *faultproxy.Proxy
	env    []string // the server's credentials, the proxy's endpoint
	store  string
	digest string
	data   map[string][]byte
}

// Members of the fault snapshot, under s3://data/fz/.
const (
	fzBig   = "a.bin"    // 4 blocks, a partial last one: the faulted member
	fzOther = "b.bin"    // 2 blocks: "the mount still serves others"
	fzOver  = "over.bin" // 2 blocks, overwritten after the pin with other bytes of the same size
	fzSmall = "small.txt"
)

func newFaultFixture(t *testing.T) *faultFixture {
	t.Helper()
	fusetest.Require(t)
	s := s3test.Start(t)
	ff := &faultFixture{s: s, store: "s3://store/pinfs", data: map[string][]byte{}}
	s.CreateBucket(t, "data", true)
	s.CreateBucket(t, "store", true)
	for k, v := range map[string][]byte{
		fzBig:   randomBytes(t, 3*mib+4321),
		fzOther: randomBytes(t, 2*mib),
		fzOver:  randomBytes(t, 2*mib),
		fzSmall: []byte("small\n"),
	} {
		ff.data[k] = v
		s.Put(t, "data", "fz/"+k, v)
	}
	ff.digest = mustPinfs(t, s.Env(), "pin", "s3://data/fz/", "--store", ff.store).lastLine()
	s.Put(t, "data", "fz/"+fzOver, randomBytes(t, 2*mib))
	p, err := faultproxy.New(s.Endpoint, faultproxy.Options{AccessKey: s.AccessKey, SecretKey: s.SecretKey, Region: s.Region})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ff.p = p
	ff.env = append(s.Env(), p.Env()...) // the later endpoint variables win
	return ff
}

// key is the proxy path of a member's object.
func (ff *faultFixture) key(rel string) string { return "/data/fz/" + rel }

// inject adds a rule for GETs of one member, removed when the case ends.
func (ff *faultFixture) inject(t *testing.T, rel string, f faultproxy.Fault, times int) *faultproxy.Injection {
	t.Helper()
	t.Cleanup(ff.p.Clear)
	return ff.p.Inject(faultproxy.Rule{Method: "GET", Path: ff.key(rel), Fault: f, Times: times})
}

// mount mounts the snapshot through the proxy with the suite's timeouts,
// a run record of its own and the given cache dir ("" for a fresh one).
func (ff *faultFixture) mount(t *testing.T, cache string, extra ...string) (dir, record string, d *daemon) {
	t.Helper()
	if cache == "" {
		cache = filepath.Join(t.TempDir(), "cache")
	}
	dir = filepath.Join(t.TempDir(), "m")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	record = filepath.Join(t.TempDir(), "run.jsonl")
	args := append([]string{ff.digest, dir, "--store", ff.store, "--cache-dir", cache, "--run-record", record,
		"--read-timeout", faultReadTimeout.String(), "--stall-timeout", faultStallTimeout.String()}, extra...)
	d = startMount(t, ff.env, dir, args...)
	return dir, record, d
}

// checkVersions fails the test if any member GET or HEAD so far went to
// the store without its versionId.
func (ff *faultFixture) checkVersions(t *testing.T) {
	t.Helper()
	for _, r := range ff.p.Unversioned("/data/") {
		t.Errorf("member request without versionId: %s %s?%s", r.Method, r.Path, r.Query.Encode())
	}
}

// gets counts the GETs of a member the proxy saw since start.
func (ff *faultFixture) gets(rel string, since time.Time) []faultproxy.Request {
	var out []faultproxy.Request
	for _, r := range ff.p.Requests() {
		if r.Method == "GET" && r.Path == ff.key(rel) && !r.Time.Before(since) {
			out = append(out, r)
		}
	}
	return out
}

// waitGET waits until the proxy has seen a GET of rel since start.
func (ff *faultFixture) waitGET(t *testing.T, rel string, since time.Time) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(ff.gets(rel, since)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no GET of %s reached the proxy within 30 s", rel)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// timedRead reads a whole file (bounded) and says how long it took.
func timedRead(t *testing.T, p string) ([]byte, time.Duration, error) {
	t.Helper()
	start := time.Now()
	b, err := readFile(t, p)
	return b, time.Since(start), err
}

// readBlock reads block k of the file at p (bounded).
func readBlock(t *testing.T, p string, k int, size int) ([]byte, error) {
	t.Helper()
	return inMount(t, 60*time.Second, func() ([]byte, error) {
		fh, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		buf := make([]byte, min(mib, size-k*mib))
		n, err := fh.ReadAt(buf, int64(k)*mib)
		return buf[:n], err
	})
}

// wantBytes fails unless the read returned exactly want.
func wantBytes(t *testing.T, what string, got []byte, err error, want []byte) {
	t.Helper()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes, %v; want the %d pinned bytes", what, len(got), err, len(want))
	}
}

// wantErrno fails unless err is errno and came within bound.
func wantErrno(t *testing.T, what string, got []byte, err error, errno syscall.Errno, took, bound time.Duration) {
	t.Helper()
	if !errors.Is(err, errno) {
		t.Fatalf("%s: %d bytes, %v after %v; want %s", what, len(got), err, took.Round(time.Millisecond), unix.ErrnoName(errno))
	}
	if took > bound {
		t.Errorf("%s: %s after %v, want within %v", what, unix.ErrnoName(errno), took.Round(time.Millisecond), bound)
	}
	t.Logf("%s: %s after %v", what, unix.ErrnoName(errno), took.Round(time.Millisecond))
}

// memberEvents returns the run record's events of kind for member rel.
func memberEvents(t *testing.T, record, kind, rel string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range events(t, record, kind) {
		if e["path"] == rel {
			out = append(out, e)
		}
	}
	return out
}

// wantEvent fails unless the run record has an event of kind for rel.
func wantEvent(t *testing.T, record, kind, rel string) []map[string]any {
	t.Helper()
	evs := memberEvents(t, record, kind, rel)
	if len(evs) == 0 {
		t.Fatalf("no %s event for %s in the run record: %v", kind, rel, events(t, record, ""))
	}
	return evs
}

// wantNoFaultEvents fails if the record blames rel for anything.
func wantNoFaultEvents(t *testing.T, record, rel string) {
	t.Helper()
	for _, kind := range []string{"mismatch", "fetch_failed", "version_missing"} {
		if evs := memberEvents(t, record, kind, rel); len(evs) > 0 {
			t.Errorf("unexpected %s events for %s: %v", kind, rel, evs)
		}
	}
}

// TestFaults injects one fault at a time between a real mount and
// versitygw and checks what a reader gets: the pinned bytes, or a
// fail-closed errno within a bound and a run-record event that says why;
// and never a member GET without its versionId.
func TestFaults(t *testing.T) {
	t.Parallel()
	ff := newFaultFixture(t)
	big, other := ff.data[fzBig], ff.data[fzOther]

	t.Run("503 burst", func(t *testing.T) {
		in := ff.inject(t, fzBig, faultproxy.SlowDown(), 3)
		dir, record, _ := ff.mount(t, "")
		b, _, err := timedRead(t, filepath.Join(dir, fzBig))
		wantBytes(t, "read through a burst of 503 SlowDown", b, err, big)
		if in.Applied() != 3 {
			t.Errorf("the proxy answered 503 %d times, want 3", in.Applied())
		}
		wantNoFaultEvents(t, record, fzBig)
		ff.checkVersions(t)
	})

	t.Run("503 forever, cat", func(t *testing.T) {
		// cat, a plain buffered read: the kernel reads the page once more
		// after its readahead failed. That retry fails at once with the
		// block's remembered failure, so cat costs one flight (one
		// fetch_failed event of block 0), one read timeout, not two.
		ff.inject(t, fzBig, faultproxy.SlowDown(), 0)
		const readTimeout = 2 * time.Second
		dir, record, _ := ff.mount(t, "", "--read-timeout", readTimeout.String(), "--stall-timeout", "1s")
		start := time.Now()
		out, err := inMount(t, 60*time.Second, func() ([]byte, error) {
			return exec.Command("cat", filepath.Join(dir, fzBig)).CombinedOutput()
		})
		took := time.Since(start)
		if err == nil || !strings.Contains(string(out), "Input/output error") {
			t.Fatalf("cat while the server throttles everything: %v, %q; want EIO", err, out)
		}
		flights := 0
		for _, e := range memberEvents(t, record, "fetch_failed", fzBig) {
			if rng, _ := e["range"].(map[string]any); rng != nil && rng["off"] == float64(0) {
				flights++
			}
		}
		if flights != 1 {
			t.Errorf("cat: %d flights of block 0 failed (fetch_failed events); want 1: %v", flights, events(t, record, ""))
		}
		// Loose: the flight count above is the check; this only catches a
		// read that waited for something else.
		if took > readTimeout+faultMargin {
			t.Errorf("cat failed after %v; want within --read-timeout %v and a margin", took.Round(time.Millisecond), readTimeout)
		}
		t.Logf("cat: EIO after %v, %d GETs of the member", took.Round(time.Millisecond), len(ff.gets(fzBig, start)))
	})

	t.Run("503 forever", func(t *testing.T) {
		ff.inject(t, fzBig, faultproxy.SlowDown(), 0)
		dir, record, _ := ff.mount(t, "")
		p := filepath.Join(dir, fzBig)
		start := time.Now()
		b, took, err := directRead(t, p, 0, mib)
		wantErrno(t, "O_DIRECT read while the server throttles everything", b, err, syscall.EIO, took, directBound)
		wantEvent(t, record, "fetch_failed", fzBig)
		t.Logf("%d GETs of the member until the read failed", len(ff.gets(fzBig, start)))
		b, took, err = timedRead(t, p)
		wantErrno(t, "buffered read while the server throttles everything", b, err, syscall.EIO, took, failBound)
		if b, err := readFile(t, filepath.Join(dir, fzSmall)); err != nil || !bytes.Equal(b, ff.data[fzSmall]) {
			t.Errorf("another member while one is throttled: %v", err)
		}
		ff.checkVersions(t)
	})

	t.Run("403", func(t *testing.T) {
		in := ff.inject(t, fzBig, faultproxy.Forbidden(), 0)
		dir, record, _ := ff.mount(t, "")
		b, took, err := timedRead(t, filepath.Join(dir, fzBig))
		// docs/mount.md: access denied gives EACCES, at once (not retried).
		wantErrno(t, "read of a member the server denies", b, err, syscall.EACCES, took, fastBound)
		wantEvent(t, record, "fetch_failed", fzBig)
		if in.Applied() == 0 {
			t.Error("the proxy never answered 403")
		}
		ff.checkVersions(t)
	})

	t.Run("reset before headers", func(t *testing.T) {
		in := ff.inject(t, fzBig, faultproxy.ResetBeforeHeaders(), 2)
		dir, record, _ := ff.mount(t, "")
		b, _, err := timedRead(t, filepath.Join(dir, fzBig))
		wantBytes(t, "read after connection resets", b, err, big)
		if in.Applied() != 2 {
			t.Errorf("the proxy reset %d connections, want 2", in.Applied())
		}
		wantNoFaultEvents(t, record, fzBig)
		ff.checkVersions(t)
	})

	t.Run("body cut", func(t *testing.T) {
		start := time.Now()
		in := ff.inject(t, fzBig, faultproxy.CutAfter(300_000), 2)
		dir, record, _ := ff.mount(t, "")
		b, _, err := timedRead(t, filepath.Join(dir, fzBig))
		wantBytes(t, "read through cut bodies", b, err, big)
		if in.Applied() != 2 {
			t.Errorf("the proxy cut %d bodies, want 2", in.Applied())
		}
		if !resumed(ff.gets(fzBig, start)) {
			t.Errorf("no request resumed inside a block after the cut: %v", ranges(ff.gets(fzBig, start)))
		}
		wantNoFaultEvents(t, record, fzBig)
		ff.checkVersions(t)
	})

	t.Run("body stalled", func(t *testing.T) {
		start := time.Now()
		in := ff.inject(t, fzBig, faultproxy.StallAfter(100_000, 0), 1)
		dir, record, _ := ff.mount(t, "")
		b, took, err := timedRead(t, filepath.Join(dir, fzBig))
		wantBytes(t, "read through a stalled body", b, err, big)
		if in.Applied() != 1 {
			t.Errorf("the proxy stalled %d bodies, want 1", in.Applied())
		}
		if took < faultStallTimeout {
			t.Errorf("the read took %v, less than the stall timeout %v: the stall was not waited out", took, faultStallTimeout)
		}
		t.Logf("requests: %v", ranges(ff.gets(fzBig, start)))
		t.Logf("read through a %v stall cut-off in %v", faultStallTimeout, took.Round(time.Millisecond))
		wantNoFaultEvents(t, record, fzBig)
		ff.checkVersions(t)
	})

	t.Run("bit flipped once", func(t *testing.T) {
		in := ff.inject(t, fzBig, faultproxy.FlipBitAt(mib+777), 1)
		dir, record, _ := ff.mount(t, "")
		b, _, err := timedRead(t, filepath.Join(dir, fzBig))
		wantBytes(t, "read after one flipped bit", b, err, big)
		if in.Applied() != 1 {
			t.Fatalf("the proxy flipped %d times, want 1", in.Applied())
		}
		ms := wantEvent(t, record, "mismatch", fzBig)
		if e, _ := ms[0]["error"].(string); len(ms) != 1 || !strings.Contains(e, "healed") || ms[0]["from"] != "network" {
			t.Errorf("mismatch events for a healed flip: %v, want one, from network, saying healed", ms)
		}
		ff.checkVersions(t)
	})

	t.Run("bit flipped always at one offset", func(t *testing.T) {
		const bad = 2
		ff.inject(t, fzBig, faultproxy.FlipBitAt(bad*mib+99), 0)
		dir, record, _ := ff.mount(t, "")
		p := filepath.Join(dir, fzBig)
		start := time.Now()
		b, err := readBlock(t, p, bad, len(big))
		wantErrno(t, "read of the block that is always corrupted", b, err, syscall.EIO, time.Since(start), failBound)
		for k := range 4 {
			if k == bad {
				continue
			}
			b, err := readBlock(t, p, k, len(big))
			wantBytes(t, fmt.Sprintf("block %d of the member with a bad block", k), b, err, big[k*mib:min((k+1)*mib, len(big))])
		}
		ms := wantEvent(t, record, "mismatch", fzBig)
		for _, e := range ms {
			if rng, _ := e["range"].(map[string]any); rng == nil || rng["off"] != float64(bad*mib) {
				t.Errorf("mismatch event for another block than %d: %v", bad, e)
			}
		}
		if e, _ := ms[len(ms)-1]["error"].(string); strings.Contains(e, "healed") {
			t.Errorf("a flip on every copy reported as healed: %v", ms)
		}
		ff.checkVersions(t)
	})

	t.Run("versionId ignored", func(t *testing.T) {
		in := ff.inject(t, fzOver, faultproxy.IgnoreVersion(), 0)
		dir, record, _ := ff.mount(t, "")
		b, took, err := timedRead(t, filepath.Join(dir, fzOver))
		switch {
		case err == nil:
			wantBytes(t, "read from a server that ignores versionId", b, err, ff.data[fzOver])
		default:
			wantErrno(t, "read from a server that ignores versionId", b, err, syscall.EIO, took, failBound)
		}
		if in.Applied() == 0 {
			t.Fatal("the proxy never dropped a versionId")
		}
		if len(memberEvents(t, record, "mismatch", fzOver))+len(memberEvents(t, record, "fetch_failed", fzOver)) == 0 {
			t.Errorf("no mismatch or fetch_failed event for %s: %v", fzOver, events(t, record, ""))
		}
		ff.checkVersions(t)
	})

	t.Run("Range ignored", func(t *testing.T) {
		in := ff.inject(t, fzBig, faultproxy.IgnoreRangeHeader(), 0)
		dir, record, _ := ff.mount(t, "")
		b, took, err := timedRead(t, filepath.Join(dir, fzBig))
		switch {
		case err == nil:
			wantBytes(t, "read from a server that ignores Range", b, err, big)
		default:
			wantErrno(t, "read from a server that ignores Range", b, err, syscall.EIO, took, failBound)
			if len(memberEvents(t, record, "fetch_failed", fzBig))+len(memberEvents(t, record, "mismatch", fzBig)) == 0 {
				t.Errorf("EIO without a fetch_failed or mismatch event: %v", events(t, record, ""))
			}
		}
		if in.Applied() == 0 {
			t.Fatal("the proxy never dropped a Range")
		}
		ff.checkVersions(t)
	})

	t.Run("gateway down for 3 s", func(t *testing.T) {
		const outage = 3 * time.Second
		// A read timeout well beyond the outage, so the retries' backoff
		// after it still fits.
		dir, record, _ := ff.mount(t, "", "--read-timeout", "20s")
		up := ff.p.Down(outage)
		b, took, err := timedRead(t, filepath.Join(dir, fzBig))
		<-up
		// An outage shorter than the read timeout is waited out: the read
		// succeeds once the gateway answers again.
		wantBytes(t, "read while the gateway is down for "+outage.String(), b, err, big)
		t.Logf("read across a %v outage in %v", outage, took.Round(time.Millisecond))
		wantNoFaultEvents(t, record, fzBig)
		ff.checkVersions(t)
	})

	t.Run("cache dir full", func(t *testing.T) {
		cache := cachetest.FullDir(t)
		dir, _, _ := ff.mount(t, cache)
		for _, rel := range []string{fzBig, fzOther} {
			b, _, err := timedRead(t, filepath.Join(dir, rel))
			wantBytes(t, rel+" with a full cache dir", b, err, ff.data[rel])
		}
		ff.checkVersions(t)
	})

	t.Run("cache dir read-only", func(t *testing.T) {
		cache := t.TempDir()
		cachetest.ReadOnly(t, cache)
		dir, _, _ := ff.mount(t, cache)
		for _, rel := range []string{fzBig, fzOther} {
			b, _, err := timedRead(t, filepath.Join(dir, rel))
			wantBytes(t, rel+" with a read-only cache dir", b, err, ff.data[rel])
		}
		ff.checkVersions(t)
	})

	t.Run("SIGKILL mid-read, then remount", func(t *testing.T) {
		start := time.Now()
		ff.inject(t, fzBig, faultproxy.StallAfter(512<<10, 0), 0)
		cache := filepath.Join(t.TempDir(), "cache")
		dir, record, d := ff.mount(t, cache)
		done := make(chan error, 1)
		go func() { _, err := os.ReadFile(filepath.Join(dir, fzBig)); done <- err }()
		ff.waitGET(t, fzBig, start)
		d.cmd.Process.Kill()
		d.exitCode(t, 10*time.Second)
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("a read in flight when the daemon was killed succeeded")
			}
			t.Logf("the read in flight got %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("a read in flight did not return within 10 s of SIGKILL of the daemon")
		}
		ff.p.Clear()
		args := []string{ff.digest, dir, "--store", ff.store, "--cache-dir", cache, "--run-record", record,
			"--read-timeout", faultReadTimeout.String(), "--stall-timeout", faultStallTimeout.String()}
		startMount(t, ff.env, dir, args...)
		for _, rel := range []string{fzBig, fzOther} {
			b, _, err := timedRead(t, filepath.Join(dir, rel))
			wantBytes(t, rel+" after remounting over the killed daemon", b, err, ff.data[rel])
		}
		ff.checkVersions(t)
	})

	t.Run("interrupt a reader blocked on a stalled fetch", func(t *testing.T) {
		ff.inject(t, fzBig, faultproxy.StallAfter(0, 0), 0)
		dir, _, _ := ff.mount(t, "")
		p := filepath.Join(dir, fzBig)

		// A reader that handles the signal gets EINTR while the fetch
		// is still stalled.
		start := time.Now()
		errno, took := interruptedPread(t, p, func() { ff.waitGET(t, fzBig, start) })
		if errno != syscall.EINTR || took > fastBound {
			t.Errorf("interrupted read: %v after %v, want EINTR within %v", errno, took.Round(time.Millisecond), fastBound)
		}
		t.Logf("interrupted read: %v after %v", errno, took.Round(time.Millisecond))
		// Readers killed by SIGINT or SIGKILL exit.
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
			cmd := exec.Command("cat", p)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			time.Sleep(500 * time.Millisecond) // cat is now blocked in read(2) on the stalled block
			sent := time.Now()
			cmd.Process.Signal(sig)
			select {
			case err := <-exited:
				if err == nil {
					t.Errorf("cat of a stalled member exited 0 after %v", sig)
				}
				t.Logf("cat killed by %v exited after %v: %v", sig, time.Since(sent).Round(time.Millisecond), err)
			case <-time.After(fastBound):
				cmd.Process.Kill()
				t.Errorf("a reader blocked on a stalled fetch did not exit within %v of %v", fastBound, sig)
			}
		}
		// The mount still serves other members while the fetch stalls, and
		// the member itself once the store answers again.
		b, _, err := timedRead(t, filepath.Join(dir, fzOther))
		wantBytes(t, "another member while one is stalled", b, err, other)
		ff.p.Clear()
		b, took, err = timedRead(t, p)
		wantBytes(t, "the stalled member after the stall ends", b, err, big)
		if took > failBound {
			t.Errorf("the stalled member took %v after the stall ended, want within %v", took, failBound)
		}
		ff.checkVersions(t)
	})
}

// interruptedPread preads the first block of the file at p (O_DIRECT) on a
// locked OS thread, calls ready once the read has reached the store, then signals
// that thread with SIGURG (which the Go runtime handles, so the kernel
// interrupts the FUSE request instead of killing anything) until the read
// returns. It returns the read's errno and the time since the first signal.
func interruptedPread(t *testing.T, p string, ready func()) (syscall.Errno, time.Duration) {
	t.Helper()
	type res struct {
		n   int
		err error
	}
	tid := make(chan int, 1)
	out := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		// O_DIRECT: a page-cache read waits for the kernel's readahead,
		// which only a fatal signal ends; a direct read is a request of
		// the reader's own, which the kernel interrupts.
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECT, 0)
		if err != nil {
			tid <- 0
			out <- res{0, err}
			return
		}
		defer unix.Close(fd)
		tid <- unix.Gettid()
		n, err := unix.Pread(fd, aligned(mib), 0)
		out <- res{n, err}
	}()
	id := <-tid
	if id == 0 {
		r := <-out
		t.Fatalf("open %s: %v", p, r.err)
	}
	ready()
	time.Sleep(200 * time.Millisecond) // the reader is now blocked in the kernel
	first := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(60 * time.Second)
	for {
		unix.Tgkill(os.Getpid(), id, unix.SIGURG)
		select {
		case r := <-out:
			took := time.Since(first)
			var errno syscall.Errno
			if r.err == nil {
				t.Errorf("interrupted pread returned %d bytes and no error", r.n)
			} else if !errors.As(r.err, &errno) {
				t.Errorf("interrupted pread: %v", r.err)
			}
			return errno, took
		case <-tick.C:
		case <-timeout:
			t.Fatal("an interrupted pread did not return within 60 s")
		}
	}
}

// directRead reads n bytes at off of the file at p with O_DIRECT (bounded),
// so that the kernel neither reads ahead nor retries a failed page.
func directRead(t *testing.T, p string, off int64, n int) ([]byte, time.Duration, error) {
	t.Helper()
	start := time.Now()
	b, err := inMount(t, 60*time.Second, func() ([]byte, error) {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECT, 0)
		if err != nil {
			return nil, err
		}
		defer unix.Close(fd)
		buf := aligned(n)
		got, err := unix.Pread(fd, buf, off)
		// A signal to this process (a child of a parallel test exiting,
		// the Go runtime's preemption) interrupts the read in the kernel,
		// which then returns EINTR; os.File retries it, and so does this.
		for err == unix.EINTR {
			got, err = unix.Pread(fd, buf, off)
		}
		if err != nil {
			return nil, &os.PathError{Op: "pread", Path: p, Err: err}
		}
		return buf[:got], nil
	})
	return b, time.Since(start), err
}

// aligned returns n bytes at a page-aligned address, as O_DIRECT needs.
func aligned(n int) []byte {
	const page = 4096
	b := make([]byte, n+page)
	skip := (page - int(uintptr(unsafe.Pointer(&b[0]))%page)) % page
	return b[skip : skip+n : skip+n]
}

// resumed reports whether a request asked for a range starting inside a
// block: a resumption from the first missing byte.
func resumed(rs []faultproxy.Request) bool {
	for _, r := range rs {
		var from int64
		if _, err := fmt.Sscanf(r.Range, "bytes=%d-", &from); err == nil && from%mib != 0 {
			return true
		}
	}
	return false
}

func ranges(rs []faultproxy.Request) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Range+" "+r.Fault)
	}
	return out
}
