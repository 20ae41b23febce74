package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/fusetest"
)

// userMount is a pinfs mount made by user nobody, as an engineer on a
// workstation makes one: through fusermount3, with /dev/fuse open to
// users.
type userMount struct {
	f     *fixture
	cache string // owned by nobody
	dir   string // the mountpoint, owned by nobody
	pids  []int  // daemons started, killed in cleanup
}

// nonRootFixture pins the fixture and prepares what user nobody needs to
// mount it. The non-root tests change files of the whole machine (the
// mode of /dev/fuse, /etc/fuse.conf), so they are the integration tests
// that do not call t.Parallel: Go runs them alone, before the parallel ones.
// What it prepares: /dev/fuse mode 0666 (its mode is restored in cleanup), the
// pinfs binary's directory traversable, a cache dir and a mountpoint of
// its own. Every mount at the mountpoint is removed in cleanup.
func nonRootFixture(t *testing.T) *userMount {
	t.Helper()
	f := pinFixture(t) // fusetest.Require: root, to hand things over to nobody
	chmodFor(t, "/dev/fuse", 0o666)
	chmodFor(t, filepath.Dir(pinfsBin), 0o755)
	pub := publicDir(t)
	m := &userMount{f: f, cache: filepath.Join(pub, "cache"), dir: filepath.Join(pub, "mnt")}
	for dir, mode := range map[string]os.FileMode{m.cache: 0o700, m.dir: 0o755} {
		if err := os.Mkdir(dir, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, pid := range m.pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		fusetest.ForceUnmount(t, m.dir)
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(m.cache, "logs", "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, b)
			}
		}
	})
	return m
}

// chmodFor sets the mode of p for the rest of the test and restores the
// mode it had in cleanup.
func chmodFor(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	old := fi.Mode().Perm()
	t.Cleanup(func() {
		if err := os.Chmod(p, old); err != nil {
			t.Errorf("restoring the mode of %s: %v", p, err)
		}
	})
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// asUser runs pinfs as uid and gid nobody (no supplementary groups) with
// the fixture's environment, bounded in time.
func (m *userMount) asUser(t testing.TB, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, pinfsBin, args...)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), m.f.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	return runCmd(t, cmd)
}

// mountArgs are the arguments of pinfs mount of the fixture at the
// mountpoint, plus extra.
func (m *userMount) mountArgs(extra ...string) []string {
	return append([]string{"mount", m.f.digest, m.dir, "--store", m.f.store, "--cache-dir", m.cache}, extra...)
}

// mount runs pinfs mount as nobody in the background (no --foreground)
// and returns the daemon's pid and log once it returned 0.
func (m *userMount) mount(t *testing.T) (pid int, log string) {
	t.Helper()
	r := m.asUser(t, m.mountArgs()...)
	if r.code != 0 {
		t.Fatalf("pinfs mount as nobody: %v", r)
	}
	i := strings.Index(r.stdout, "(pid ")
	if i < 0 {
		t.Fatalf("pinfs mount printed no pid: %q", r.stdout)
	}
	rest := strings.TrimPrefix(r.stdout[i:], "(pid ")
	num, after, _ := strings.Cut(rest, ", log ")
	pid, err := strconv.Atoi(num)
	if err != nil {
		t.Fatalf("pinfs mount output %q: %v", r.stdout, err)
	}
	m.pids = append(m.pids, pid)
	log, _, _ = strings.Cut(after, ")")
	if e, ok := fusetest.Info(m.dir); !ok || e.FSType != "fuse.pinfs" {
		t.Fatalf("pinfs mount returned 0 but %s is not a pinfs mount (%+v)", m.dir, e)
	}
	return pid, log
}

// wantServed reads member rel as nobody and fails unless it has the pinned bytes.
func (m *userMount) wantServed(t *testing.T, rel string) {
	t.Helper()
	out, errOut, err := asNobody(t, "cat", filepath.Join(m.dir, rel))
	if err != nil || out != string(m.f.data[rel]) {
		t.Fatalf("nobody reading %s: %v %s (%d bytes, want the %d pinned)", rel, err, errOut, len(out), len(m.f.data[rel]))
	}
}

// waitDead waits (bounded) until the mount's daemon is gone: nobody's
// stat of the mountpoint fails with ENOTCONN.
func (m *userMount) waitDead(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, errOut, err := asNobody(t, "stat", m.dir)
		if err != nil && strings.Contains(errOut, "Transport endpoint is not connected") { // strerror(ENOTCONN)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still answers 30s after its daemon was killed: %v %s", m.dir, err, errOut)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitRunEnd waits (bounded) until the run record in the cache dir ends
// with a run_end.
func (m *userMount) waitRunEnd(t *testing.T) {
	t.Helper()
	record := filepath.Join(m.cache, "runs.jsonl")
	deadline := time.Now().Add(30 * time.Second)
	for {
		all := events(t, record, "")
		if len(all) > 0 && all[len(all)-1]["event"] == "run_end" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run_end 30s after the unmount: %v", all)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// oneLine fails unless r's stderr is exactly one line holding want.
func oneLine(t *testing.T, r result, want string) {
	t.Helper()
	errOut := strings.TrimSpace(r.stderr)
	if strings.Contains(errOut, "\n") || !strings.Contains(errOut, want) || strings.Contains(errOut, "fusermount exited") {
		t.Errorf("stderr is not one line with %q: %v", want, r)
	}
}

// TestNonRootMountAndUnmount: a user mounts in the background, reads the
// pinned bytes, cannot mount twice, unmounts, and the run ends.
func TestNonRootMountAndUnmount(t *testing.T) {
	m := nonRootFixture(t)
	m.mount(t)
	m.wantServed(t, "train/mid.bin") // overwritten in the bucket after the pin
	m.wantServed(t, "README")

	r := m.asUser(t, m.mountArgs()...)
	if r.code != 1 {
		t.Errorf("a second mount at a live mount: want exit 1, got %v", r)
	}
	oneLine(t, r, "mountpoint "+m.dir+" is already mounted (pinfs "+m.f.digest+"); unmount it first: pinfs unmount "+m.dir)

	if r := m.asUser(t, "unmount", m.dir); r.code != 0 {
		t.Fatalf("pinfs unmount as nobody: %v", r)
	}
	if fusetest.Mounted(m.dir) {
		t.Fatal("still mounted after pinfs unmount")
	}
	m.waitRunEnd(t)

	r = m.asUser(t, "unmount", m.dir)
	if r.code != 1 {
		t.Errorf("unmount of a directory that is not mounted: want exit 1, got %v", r)
	}
	oneLine(t, r, "unmount "+m.dir+": not mounted")
}

// TestNonRootLazyUnmount: a user's mount with an open file is busy;
// --lazy detaches it, the open file still reads the pinned bytes, and
// the run ends once it is closed.
func TestNonRootLazyUnmount(t *testing.T) {
	m := nonRootFixture(t)
	m.mount(t)
	const rel = "train/mid.bin"
	h := m.hold(t, rel)
	r := m.asUser(t, "unmount", m.dir)
	if r.code != 1 {
		t.Fatalf("unmount of a busy mount: want exit 1, got %v", r)
	}
	oneLine(t, r, "unmount "+m.dir+": mount is busy (files are open); use --lazy to detach it now")
	if !fusetest.Mounted(m.dir) {
		t.Fatal("pinfs unmount without --lazy removed a busy mount")
	}
	if r := m.asUser(t, "unmount", "--lazy", m.dir); r.code != 0 {
		t.Fatalf("pinfs unmount --lazy as nobody: %v", r)
	}
	if fusetest.Mounted(m.dir) {
		t.Fatal("still mounted at the mountpoint after pinfs unmount --lazy")
	}

	got, err := h.read(t)
	if err != nil || !bytes.Equal(got, m.f.data[rel]) {
		t.Fatalf("the file open on the detached mount read %d bytes (%v), want the %d pinned", len(got), err, len(m.f.data[rel]))
	}
	m.waitRunEnd(t) // the last file is closed: the daemon ends the run
}

// TestNonRootSIGTERMWithAnOpenFile: SIGTERM to a user's daemon while a
// file is open detaches the busy mount lazily (through fusermount3 -u -z)
// and ends the run.
func TestNonRootSIGTERMWithAnOpenFile(t *testing.T) {
	m := nonRootFixture(t)
	pid, log := m.mount(t)
	m.hold(t, "README")
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	m.waitRunEnd(t)
	if fusetest.Mounted(m.dir) {
		b, _ := os.ReadFile(log)
		t.Fatalf("still mounted after SIGTERM with an open file:\n%s", b)
	}
}

// holder is a process of nobody that holds a member of the mount open
// (root may not open files of nobody's mount).
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// hold opens member rel as nobody on fd 3 and returns once it is open.
// The file stays open until read is called or the test ends.
func (m *userMount) hold(t *testing.T, rel string) *holder {
	t.Helper()
	cmd := exec.Command("sh", "-c", `exec 3<"$1" || exit 1; echo open; read x; exec cat <&3`, "sh", filepath.Join(m.dir, rel))
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	h := &holder{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	if line, err := inMount(t, 30*time.Second, func() (string, error) { return h.out.ReadString('\n') }); line != "open\n" {
		t.Fatalf("nobody could not open %s: %q %v", rel, line, err)
	}
	return h
}

// read has the holder read the whole file through its open descriptor,
// close it and exit, and returns what it read.
func (h *holder) read(t *testing.T) ([]byte, error) {
	t.Helper()
	if _, err := io.WriteString(h.stdin, "go\n"); err != nil {
		return nil, err
	}
	h.stdin.Close()
	got, err := inMount(t, 60*time.Second, func() ([]byte, error) { return io.ReadAll(h.out) })
	if err != nil {
		return got, err
	}
	return got, h.cmd.Wait()
}

// TestNonRootStaleMount: a user's daemon killed with SIGKILL leaves a
// dead mount; the user's next pinfs mount removes it and serves, and the
// user's pinfs unmount removes a dead mount too.
func TestNonRootStaleMount(t *testing.T) {
	m := nonRootFixture(t)
	pid, log := m.mount(t)
	m.wantServed(t, "README")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	m.waitDead(t)

	pid, log2 := m.mount(t)
	b, err := os.ReadFile(log2)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "removed a dead mount"); n != 1 || log2 != log {
		t.Errorf("the mount log %s (first %s) says %d times that it removed a dead mount, want once:\n%s", log2, log, n, b)
	}
	m.wantServed(t, "val/v.txt")

	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	m.waitDead(t)
	if r := m.asUser(t, "unmount", m.dir); r.code != 0 {
		t.Fatalf("pinfs unmount of a dead mount as nobody: %v", r)
	}
	if fusetest.Mounted(m.dir) {
		t.Fatal("the dead mount is still there after pinfs unmount")
	}
}

// TestNonRootFuseDeviceClosed: with /dev/fuse not open to the user, and
// with --allow-other not allowed to users, pinfs mount says so in one
// line and mounts nothing.
func TestNonRootFuseDeviceClosed(t *testing.T) {
	m := nonRootFixture(t)
	if !usersMayAllowOther(t) {
		r := m.asUser(t, m.mountArgs("--allow-other")...)
		if r.code != 1 {
			t.Errorf("--allow-other as nobody: want exit 1, got %v", r)
		}
		oneLine(t, r, "--allow-other as a user other than root needs a line user_allow_other in /etc/fuse.conf (or mount as root)")
	}

	chmodFor(t, "/dev/fuse", 0o600)
	const want = "cannot open /dev/fuse: permission denied (make it rw for this user, mode 0666, or mount as root)"
	r := m.asUser(t, m.mountArgs()...)
	if r.code != 1 {
		t.Errorf("background mount with /dev/fuse 0600: want exit 1, got %v", r)
	}
	oneLine(t, r, want)
	r = m.asUser(t, m.mountArgs("--foreground")...)
	last := strings.TrimSpace(r.stderr)
	last = last[strings.LastIndex(last, "\n")+1:]
	if r.code != 1 || !strings.HasPrefix(last, "pinfs mount: ") || !strings.Contains(last, want) || strings.Contains(r.stderr, "fusermount exited") {
		t.Errorf("foreground mount with /dev/fuse 0600: want exit 1 and a last line with %q, got %v", want, r)
	}
	if fusetest.Mounted(m.dir) {
		t.Error("mounted although /dev/fuse is closed to the user")
	}
}

// fuseConf is fusermount's configuration file.
const fuseConf = "/etc/fuse.conf"

// usersMayAllowOther reports whether fuseConf lets users mount with
// allow_other (a line user_allow_other), after making sure under CI=true
// that it does not: there the file is rewritten with those lines
// commented out, and restored byte for byte in cleanup, so that the
// --allow-other refusal is always checked in CI. Elsewhere a machine's
// file is left alone and the check is left out with a log line.
func usersMayAllowOther(t *testing.T) bool {
	t.Helper()
	conf, err := os.ReadFile(fuseConf)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(conf), "\n")
	allowed := false
	for i, l := range lines {
		if opt, _, _ := strings.Cut(l, "#"); strings.TrimSpace(opt) == "user_allow_other" {
			allowed = true
			lines[i] = "# " + l + " (commented out by pinfs TestNonRootFuseDeviceClosed)"
		}
	}
	switch {
	case !allowed:
		return false
	case os.Getenv("CI") != "true":
		t.Logf("%s has user_allow_other: leaving the --allow-other check out (CI=true takes it out of the file for the test)", fuseConf)
		return true
	}
	fi, err := os.Stat(fuseConf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(fuseConf, conf, fi.Mode().Perm()); err != nil {
			t.Errorf("restoring %s: %v", fuseConf, err)
		}
	})
	if err := os.WriteFile(fuseConf, []byte(strings.Join(lines, "\n")), fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: user_allow_other commented out for the test", fuseConf)
	return false
}
