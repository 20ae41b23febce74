package fs

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/pinfs/pinfs/verify"
)

// backReader is a memReader that is a Backer: member i has a backing file
// when backed[i], written from its bytes. It counts ReadAt, Backing and
// PassedThrough calls per member.
type backReader struct {
	*memReader
	dir   string
	delay time.Duration // how long Backing takes
	// entered, if set, is sent to when Backing starts (never blocking),
	// and hold, if set, is waited for before the delay: a test's hooks.
	entered chan int
	hold    chan struct{}

	mu       sync.Mutex
	backed   map[int]bool
	reads    map[int]int
	backings map[int]int
	rechecks map[int]int
	passed   map[int]int
}

var (
	_ Backer = (*backReader)(nil)
	_ Opener = (*backReader)(nil)
)

func newBackReader(t testing.TB, data [][]byte, backed ...int) *backReader {
	t.Helper()
	r := &backReader{memReader: &memReader{data: data}, dir: t.TempDir(),
		backed: map[int]bool{}, reads: map[int]int{}, backings: map[int]int{}, rechecks: map[int]int{}, passed: map[int]int{}}
	for _, i := range backed {
		if err := os.WriteFile(filepath.Join(r.dir, strconv.Itoa(i)), data[i], 0o400); err != nil {
			t.Fatal(err)
		}
		r.backed[i] = true
	}
	return r
}

func (r *backReader) ReadAt(ctx context.Context, i int, p []byte, off int64) (int, error) {
	r.mu.Lock()
	r.reads[i]++
	r.mu.Unlock()
	return r.memReader.ReadAt(ctx, i, p, off)
}

func (r *backReader) Backing(ctx context.Context, i int) (*os.File, bool) {
	select {
	case r.entered <- i:
	default:
	}
	if r.hold != nil {
		select {
		case <-r.hold:
		case <-ctx.Done():
			return nil, false
		}
	}
	if r.delay > 0 { // a verification that stops when its ctx ends
		select {
		case <-time.After(r.delay):
		case <-ctx.Done():
			return nil, false
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.backings[i]++
	if !r.backed[i] {
		return nil, false
	}
	f, err := os.OpenFile(filepath.Join(r.dir, strconv.Itoa(i)), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, false
	}
	return f, true
}

// Recheck reports whether member i's backing file f still has its
// member's bytes, and counts the call.
func (r *backReader) Recheck(ctx context.Context, i int, f *os.File) bool {
	r.mu.Lock()
	r.rechecks[i]++
	r.mu.Unlock()
	b := make([]byte, len(r.data[i])+1)
	n, _ := f.ReadAt(b, 0)
	return bytes.Equal(b[:n], r.data[i])
}

func (r *backReader) PassedThrough(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.passed[i]++
}

// setBacked says whether member i has a backing file from now on.
func (r *backReader) setBacked(i int, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.backed[i] = ok
}

// counts returns the ReadAt, Backing and PassedThrough calls for member i.
func (r *backReader) counts(i int) (reads, backings, passed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads[i], r.backings[i], r.passed[i]
}

// mountPassthrough mounts root and returns the mount point, the server
// and a function that unmounts early (the test's end does otherwise).
func mountPassthrough(t testing.TB, root gofs.InodeEmbedder) (string, *fuse.Server, func()) {
	t.Helper()
	var srv *fuse.Server
	dir, unmount := mountWith(t, root, func(dir string, root gofs.InodeEmbedder) (*fuse.Server, error) {
		s, err := Mount(dir, root, MountOptions{})
		srv = s
		return s, err
	})
	return dir, srv, unmount
}

// mountProbed mounts snap served by r with passthrough, probed on (the
// test is skipped where it cannot be, as probeOn says), and returns the
// root, the mountpoint and the switch.
func mountProbed(t testing.TB, snap *verify.Snapshot, r Reader) (gofs.InodeEmbedder, string, *Passthrough) {
	t.Helper()
	pt := &Passthrough{}
	opts := testOptions()
	opts.Passthrough = pt
	root := NewRoot(snap, r, opts)
	dir, srv, _ := mountPassthrough(t, root)
	probeOn(t, pt, srv)
	return root, dir, pt
}

// probeOn probes p with a file of dir, and skips the test where this
// kernel or user cannot use passthrough (fails under CI=true as root).
func probeOn(t testing.TB, p *Passthrough, srv *fuse.Server) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "probe")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if reason := p.Probe(srv, f); reason != "" {
		if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
			t.Fatalf("passthrough off as root under CI=true: %s", reason)
		}
		t.Skipf("passthrough off: %s", reason)
	}
}

// memberIndex returns the index of path in snap's table.
func memberIndex(t testing.TB, ms []string, path string) int {
	t.Helper()
	for i, p := range ms {
		if p == path {
			return i
		}
	}
	t.Fatalf("no member %s", path)
	return -1
}

// paths lists the member paths in member order.
func paths(t testing.TB, specs []spec) []string {
	t.Helper()
	snap, _ := snapshot(t, specs)
	var ps []string
	for _, m := range snap.Members() {
		ps = append(ps, m.Path)
	}
	return ps
}

// waitReleased waits until member i's node has no live opens counted
// (RELEASE reaches the daemon after close(2) returns).
func waitReleased(t testing.TB, root gofs.InodeEmbedder, dir, path string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		f := fileNode(t, root, dir, path)
		f.opens.mu.Lock()
		pt, cached, backing := f.opens.pt, f.opens.cached, f.opens.backing
		f.opens.mu.Unlock()
		if pt == 0 && cached == 0 && backing == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d passthrough and %d cached opens still counted (backing file %v) after every close", path, pt, cached, backing != nil)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fileNode returns the file node of path, looked up by the kernel already.
func fileNode(t testing.TB, root gofs.InodeEmbedder, dir, path string) *file {
	t.Helper()
	n := root.EmbeddedInode()
	for _, c := range strings.Split(path, "/") {
		if n = n.GetChild(c); n == nil {
			t.Fatalf("%s: no inode for %s", dir, path)
		}
	}
	return n.Operations().(*file)
}

func readAll(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPassthroughOpen: a member with a backing file is served by the
// kernel from it, read(2) and mmap alike, exact bytes and no ReadAt; it counts as passed through,
// not as opened, in the Backer and the counters; its backing file is
// closed at release. A member without one is served through the Reader.
func TestPassthroughOpen(t *testing.T) {
	snap, data := snapshot(t, fixture)
	ps := paths(t, fixture)
	big, small := memberIndex(t, ps, "train/part-000.jsonl"), memberIndex(t, ps, "a/y/z.bin")
	r := newBackReader(t, data, big)
	root, dir, pt := mountProbed(t, snap, r)

	for range 2 {
		if got := readAll(t, filepath.Join(dir, ps[big])); !bytes.Equal(got, data[big]) {
			t.Fatalf("%s: %d bytes differ from the member's %d", ps[big], len(got), len(data[big]))
		}
		waitReleased(t, root, dir, ps[big])
	}
	// mmap of a passthrough open maps the backing file.
	mf, err := os.Open(filepath.Join(dir, ps[big]))
	if err != nil {
		t.Fatal(err)
	}
	m, err := syscall.Mmap(int(mf.Fd()), 0, len(data[big]), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap of a passthrough open: %v", err)
	}
	same := bytes.Equal(m, data[big])
	syscall.Munmap(m)
	mf.Close()
	if !same {
		t.Errorf("%s: mmap differs from the member", ps[big])
	}
	waitReleased(t, root, dir, ps[big])
	if reads, backings, passed := r.counts(big); reads != 0 || backings != 3 || passed != 3 || r.openCount(big) != 0 {
		t.Errorf("%s: %d ReadAt, %d Backing, %d PassedThrough, %d Opened; want 0, 3, 3, 0", ps[big], reads, backings, passed, r.openCount(big))
	}
	if got := readAll(t, filepath.Join(dir, ps[small])); !bytes.Equal(got, data[small]) {
		t.Fatalf("%s: content differs", ps[small])
	}
	waitReleased(t, root, dir, ps[small])
	if reads, backings, passed := r.counts(small); reads == 0 || backings != 1 || passed != 0 || r.openCount(small) != 1 {
		t.Errorf("%s (no backing file): %d ReadAt, %d Backing, %d PassedThrough, %d Opened; want >0, 1, 0, 1", ps[small], reads, backings, passed, r.openCount(small))
	}
	if st := pt.Status(); !st.Enabled || st.Opens != 3 || st.Bytes != 3*int64(len(data[big])) || st.Reason != "" {
		t.Errorf("status %+v, want enabled, 3 opens of %d bytes", st, len(data[big]))
	}
}

// TestPassthroughModesDoNotMix: the kernel fails with EIO an open whose
// mode differs from the live opens of the inode, so a cached open live
// keeps a second open cached (Backing is not even asked), a passthrough
// open live keeps a second open passthrough even when the backing file is
// gone meanwhile, and both read the right bytes; once they are released,
// a cached open works again.
func TestPassthroughModesDoNotMix(t *testing.T) {
	snap, data := snapshot(t, fixture)
	ps := paths(t, fixture)
	i := memberIndex(t, ps, "train/part-000.jsonl")
	r := newBackReader(t, data, i)
	pt := &Passthrough{}
	opts := testOptions()
	opts.Passthrough = pt
	root := NewRoot(snap, r, opts)
	dir, srv, _ := mountPassthrough(t, root)
	p := filepath.Join(dir, ps[i])

	// Off until probed: a cached open, and Backing is not asked.
	first, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	probeOn(t, pt, srv)
	second, err := os.Open(p)
	if err != nil {
		t.Fatalf("second open while a cached open is live: %v", err)
	}
	for _, f := range []*os.File{first, second} {
		got := make([]byte, len(data[i]))
		if n, err := f.ReadAt(got, 0); n != len(got) || !bytes.Equal(got, data[i]) {
			t.Fatalf("read of a cached open: %d bytes, %v", n, err)
		}
	}
	if _, backings, passed := r.counts(i); backings != 0 || passed != 0 {
		t.Errorf("with a cached open live: %d Backing, %d PassedThrough calls, want none", backings, passed)
	}
	first.Close()
	second.Close()
	waitReleased(t, root, dir, ps[i])

	// A passthrough open live: the next open is passthrough too, though
	// the Backer has no file to give any more.
	third, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	r.setBacked(i, false)
	fourth, err := os.Open(p)
	if err != nil {
		t.Fatalf("second open while a passthrough open is live: %v", err)
	}
	defer fourth.Close()
	readsBefore, _, _ := r.counts(i)
	for _, f := range []*os.File{third, fourth} {
		got := make([]byte, len(data[i]))
		if n, err := f.ReadAt(got, 0); n != len(got) || !bytes.Equal(got, data[i]) {
			t.Fatalf("read of a passthrough open: %d bytes, %v", n, err)
		}
	}
	if reads, backings, passed := r.counts(i); reads != readsBefore || backings != 1 || passed != 2 {
		t.Errorf("two passthrough opens: %d more ReadAt, %d Backing, %d PassedThrough; want 0, 1, 2", reads-readsBefore, backings, passed)
	}
	third.Close()
	fourth.Close()
	waitReleased(t, root, dir, ps[i])

	// Every passthrough open released: with no backing file the next open
	// is a cached one, and the kernel takes it.
	if got := readAll(t, p); !bytes.Equal(got, data[i]) {
		t.Fatalf("a cached open after the passthrough ones: %d bytes differ", len(got))
	}
	if reads, _, _ := r.counts(i); reads == readsBefore {
		t.Error("a cached open after the passthrough ones was served without ReadAt")
	}
	waitReleased(t, root, dir, ps[i])
}

// TestPassthroughDisabled: without Options.Passthrough, or with it never
// switched on, or switched off, Backing is never asked and every open is
// served through the Reader.
func TestPassthroughDisabled(t *testing.T) {
	snap, data := snapshot(t, fixture)
	ps := paths(t, fixture)
	i := memberIndex(t, ps, "train/part-000.jsonl")
	for _, c := range []struct {
		name string
		pt   *Passthrough
		off  bool
	}{{"nil", nil, false}, {"not probed", &Passthrough{}, false}, {"switched off", &Passthrough{}, true}} {
		t.Run(c.name, func(t *testing.T) {
			r := newBackReader(t, data, i)
			opts := testOptions()
			opts.Passthrough = c.pt
			dir, srv, _ := mountPassthrough(t, NewRoot(snap, r, opts))
			if c.off {
				probeOn(t, c.pt, srv)
				c.pt.Off(ReasonDisabled)
			}
			if got := readAll(t, filepath.Join(dir, ps[i])); !bytes.Equal(got, data[i]) {
				t.Fatal("content differs")
			}
			if reads, backings, passed := r.counts(i); reads == 0 || backings != 0 || passed != 0 || r.openCount(i) != 1 {
				t.Errorf("%d ReadAt, %d Backing, %d PassedThrough, %d Opened; want >0, 0, 0, 1", reads, backings, passed, r.openCount(i))
			}
			if c.off {
				if st := c.pt.Status(); st.Enabled || st.Reason != ReasonDisabled {
					t.Errorf("status %+v, want off with reason %q", st, ReasonDisabled)
				}
			}
		})
	}
}

// TestPassthroughRefusedAfterProbe: a READ of a passthrough open means
// the kernel did not take the backing file (go-fuse then turns backing
// files off for good): the switch goes off with its reason, logged once,
// and the read is served.
func TestPassthroughRefusedAfterProbe(t *testing.T) {
	snap, data := snapshot(t, fixture)
	ps := paths(t, fixture)
	i := memberIndex(t, ps, "train/part-000.jsonl")
	r := newBackReader(t, data, i)
	pt := &Passthrough{}
	var logs bytes.Buffer
	opts := testOptions()
	opts.Passthrough = pt
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	root := NewRoot(snap, r, opts)
	dir, srv, _ := mountPassthrough(t, root)
	probeOn(t, pt, srv)
	if _, err := os.Stat(filepath.Join(dir, ps[i])); err != nil {
		t.Fatal(err)
	}
	f := fileNode(t, root, dir, ps[i])
	h := &passthroughHandle{f: f}
	for range 2 {
		buf := make([]byte, 4096)
		res, errno := f.Read(context.Background(), h, buf, 0)
		if errno != 0 {
			t.Fatalf("read: %v", errno)
		}
		if got, _ := res.Bytes(buf); !bytes.Equal(got, data[i][:4096]) {
			t.Fatal("read: bytes differ")
		}
	}
	if st := pt.Status(); st.Enabled || st.Reason != ReasonRefused {
		t.Errorf("status %+v, want off with reason %q", st, ReasonRefused)
	}
	if n := strings.Count(logs.String(), `msg="passthrough off"`); n != 1 || !strings.Contains(logs.String(), ReasonRefused) {
		t.Errorf("%d passthrough off lines, want 1 with the reason:\n%s", n, logs.String())
	}
}

// TestPassthroughRecheck: a new open of a node whose passthrough open is
// live shares its backing file, so it is rechecked first: while the file
// still holds the member's bytes the open is served from it; once it was
// written to in place the new open fails with EIO (the kernel would serve
// it the changed bytes, and takes no other kind of open of the inode),
// and after the live open closes a new open is served again.
func TestPassthroughRecheck(t *testing.T) {
	snap, data := snapshot(t, fixture)
	ps := paths(t, fixture)
	big := memberIndex(t, ps, "train/part-000.jsonl")
	r := newBackReader(t, data, big)
	root, dir, _ := mountProbed(t, snap, r)
	p := filepath.Join(dir, ps[big])

	live, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if got := readAll(t, p); !bytes.Equal(got, data[big]) {
		t.Fatalf("a second open while one is live: %d bytes differ", len(got))
	}
	r.mu.Lock()
	rechecks := r.rechecks[big]
	r.mu.Unlock()
	if rechecks != 1 {
		t.Fatalf("%d rechecks of the live backing file for a second open, want 1", rechecks)
	}
	// Written to in place: the same inode the kernel reads for the live open.
	backing := filepath.Join(r.dir, strconv.Itoa(big))
	w, err := os.OpenFile(backing, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte{data[big][0] ^ 0xff}, 0); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if f, err := os.Open(p); !errors.Is(err, syscall.EIO) {
		if err == nil {
			f.Close()
		}
		t.Fatalf("a new open sharing a changed backing file: %v, want EIO", err)
	}
	live.Close()
	waitReleased(t, root, dir, ps[big])
	r.setBacked(big, false)
	if got := readAll(t, p); !bytes.Equal(got, data[big]) {
		t.Fatalf("after the live open closed: %d bytes differ from the member", len(got))
	}
}

// TestPassthroughOpenInterrupted: a signal to the opening process while
// Backing verifies (the kernel then sends INTERRUPT, and go-fuse cancels
// the open's ctx) does not cost the open its passthrough.
func TestPassthroughOpenInterrupted(t *testing.T) {
	bash := requireTool(t, "bash")
	snap, data := snapshot(t, fixture)
	ps := paths(t, fixture)
	big := memberIndex(t, ps, "train/part-000.jsonl")
	r := newBackReader(t, data, big)
	r.entered, r.hold = make(chan int, 1), make(chan struct{})
	release := sync.OnceFunc(func() { close(r.hold) })
	t.Cleanup(release)
	// The verification's own time, from the moment the interrupt has
	// reached the daemon: a ctx that INTERRUPT cancels ends it at once.
	r.delay = 200 * time.Millisecond
	pt := &Passthrough{}
	opts := testOptions()
	opts.Passthrough = pt
	interrupted := make(chan struct{})
	opts.Logger = slog.New(onMessage{"INTERRUPT", sync.OnceFunc(func() { close(interrupted) })})
	root := NewRoot(snap, r, opts)
	var srv *fuse.Server
	dir, _ := mountWith(t, root, func(dir string, root gofs.InodeEmbedder) (*fuse.Server, error) {
		s, err := Mount(dir, root, MountOptions{Debug: true}) // go-fuse logs each request it reads
		srv = s
		return s, err
	})
	probeOn(t, pt, srv)

	// bash handles USR1 (a trap), so the signal is pending during the open
	// it makes for the redirection, and does not kill it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "-c", `trap 'echo signalled >&2' USR1; exec 3<"$1"; cat <&3 >/dev/null`, "bash", filepath.Join(dir, ps[big]))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.entered: // bash is in open(2), waiting for the daemon
	case <-time.After(30 * time.Second):
		t.Fatalf("Backing not asked for the open in 30 s (stderr %q)", stderr.String())
	}
	cmd.Process.Signal(syscall.SIGUSR1)
	select {
	case <-interrupted:
	case <-time.After(30 * time.Second):
		t.Fatal("no INTERRUPT reached the daemon 30 s after the signal")
	}
	release()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("bash: %v: %s", err, stderr.String())
	}
	waitReleased(t, root, dir, ps[big])
	if reads, _, passed := r.counts(big); reads != 0 || passed != 1 || !strings.Contains(stderr.String(), "signalled") {
		t.Fatalf("an interrupted open: %d ReadAt, %d PassedThrough; want 0, 1 (stderr %q, want the trap's line)", reads, passed, stderr.String())
	}
}

// onMessage is a slog.Handler that calls f for each record whose message
// contains sub, and drops every record.
type onMessage struct {
	sub string
	f   func()
}

func (h onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h onMessage) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h onMessage) WithGroup(string) slog.Handler            { return h }

func (h onMessage) Handle(_ context.Context, rec slog.Record) error {
	if strings.Contains(rec.Message, h.sub) {
		h.f()
	}
	return nil
}
