package mount

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pinfs/pinfs/fs/mountinfo"
)

// mountinfoLine is one line of /proc/self/mountinfo for a mount of fstype
// from source at point (escaped as the kernel does).
func mountinfoLine(point, fstype, source string) string {
	esc := strings.NewReplacer(" ", `\040`, "\t", `\011`, `\`, `\134`)
	return "36 35 0:52 / " + esc.Replace(point) + " ro,nosuid,nodev shared:1 - " + fstype + " " + esc.Replace(source) + " ro,user_id=0\n"
}

func TestCheckMountpoint(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(dir, "live")
	other := filepath.Join(dir, "emptydir")
	for _, d := range []string{live, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	info := filepath.Join(dir, "mountinfo")
	if err := os.WriteFile(info, []byte(mountinfoLine(mountinfo.Canonical(live), "fuse.pinfs", "sha256:00ff")+
		mountinfoLine(mountinfo.Canonical(other), "tmpfs", "tmpfs")), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		dir, want string
	}{
		{missing, "mountpoint " + missing + " does not exist: create it with mkdir -p " + missing + ", or pass --mkdir"},
		{filepath.Join(file, "sub"), "mountpoint " + filepath.Join(file, "sub") + " does not exist (a parent is not a directory)"},
		{file, "mountpoint " + file + " is not a directory"},
		{live, "mountpoint " + live + " is already mounted (pinfs sha256:00ff); unmount it first: pinfs unmount " + live},
		{other, ""}, // another type of mount (an emptyDir) is mounted over
		{dir, ""},
	} {
		err := checkMountpoint(info, tc.dir, false)
		if got := errText(err); got != tc.want {
			t.Errorf("checkMountpoint(%s) = %q, want %q", tc.dir, got, tc.want)
		}
	}
	// Without the mountinfo entry, the live mount is an ordinary directory.
	if err := checkMountpoint(filepath.Join(dir, "none"), live, false); err != nil {
		t.Errorf("a directory that is not mounted: %v", err)
	}
}

// TestCheckMountpointCreates: with create (pinfs mount --mkdir) a missing
// mountpoint is made with its parents, mode 0755, as mkdir -p makes it;
// what create cannot fix is still refused with the same one line.
func TestCheckMountpointCreates(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0o022))
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	none := filepath.Join(dir, "none")
	deep := filepath.Join(dir, "a", "b", "sha256:00ff")
	if err := checkMountpoint(none, deep, true); err != nil {
		t.Fatalf("checkMountpoint(%s, create): %v", deep, err)
	}
	for _, d := range []string{filepath.Join(dir, "a"), filepath.Join(dir, "a", "b"), deep} {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s after --mkdir: %v, %v; want a directory 0755", d, fi, err)
		}
	}
	if err := checkMountpoint(none, deep, true); err != nil {
		t.Errorf("checkMountpoint(create) of a directory that exists: %v", err)
	}
	for _, tc := range []struct{ dir, want string }{
		{file, "mountpoint " + file + " is not a directory"},
		{filepath.Join(file, "sub"), "mountpoint " + filepath.Join(file, "sub") + " does not exist (a parent is not a directory)"},
	} {
		if got := errText(checkMountpoint(none, tc.dir, true)); got != tc.want {
			t.Errorf("checkMountpoint(%s, create) = %q, want %q", tc.dir, got, tc.want)
		}
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		err := checkMountpoint(none, filepath.Join(ro, "x"), true)
		if got := errText(err); !strings.HasPrefix(got, "mountpoint "+filepath.Join(ro, "x")+": creating it: ") || !errors.Is(err, syscall.EACCES) {
			t.Errorf("checkMountpoint(create) under a read-only dir = %q; want creating it: ... EACCES", got)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestUnmountError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{syscall.EBUSY, "unmount /x: mount is busy (files are open); use --lazy to detach it now"},
		{syscall.EINVAL, "unmount /x: not mounted"},
		{syscall.ENOENT, "unmount /x: it does not exist"},
		{errors.New("fusermount3: entry for /x not found in /etc/mtab"), "unmount /x: fusermount3: entry for /x not found in /etc/mtab"},
	} {
		err := unmountError("/x", tc.err)
		if err.Error() != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("unmountError(%v) = %q (wraps it: %v), want %q", tc.err, err, errors.Is(err, tc.err), tc.want)
		}
	}
}

func TestUnmountNotMounted(t *testing.T) {
	dir := t.TempDir()
	err := Unmount(dir, false)
	if err == nil || err.Error() != "unmount "+dir+": not mounted" {
		t.Errorf("Unmount of a plain directory: %v", err)
	}
	missing := filepath.Join(dir, "missing")
	if err := Unmount(missing, true); err == nil || !strings.HasPrefix(err.Error(), "unmount "+missing+": ") || strings.Contains(err.Error(), "\n") {
		t.Errorf("Unmount of a missing directory: %v", err)
	}
}

// fakeFusermount puts a fusermount3 on $PATH that records its arguments
// in the returned file, writes stderr to its stderr and exits with code.
func fakeFusermount(t *testing.T, stderr string, code int) string {
	t.Helper()
	bin := t.TempDir()
	args := filepath.Join(bin, "args")
	script := "#!/bin/sh\necho \"$@\" > " + args + "\nprintf '%s' '" + stderr + "' >&2\nexit " + strconv.Itoa(code) + "\n"
	if err := os.WriteFile(filepath.Join(bin, "fusermount3"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	return args
}

func TestFusermountUnmount(t *testing.T) {
	for _, tc := range []struct {
		name, stderr string
		code         int
		lazy         bool
		wantArgs     string
		want         string // error text; "" for none
		wantBusy     bool
	}{
		{name: "ok", wantArgs: "-u -- /m/x"},
		{name: "lazy", lazy: true, wantArgs: "-u -z -- /m/x"},
		{name: "busy", stderr: "fusermount3: failed to unmount /m/x: Device or resource busy\n", code: 1,
			wantArgs: "-u -- /m/x", want: "device or resource busy", wantBusy: true},
		{name: "refused", stderr: "fusermount3: entry for /m/x not found\n in /etc/mtab\n", code: 1,
			wantArgs: "-u -- /m/x", want: "fusermount3: entry for /m/x not found in /etc/mtab"},
		{name: "silent", code: 1, wantArgs: "-u -- /m/x", want: "fusermount3: exit status 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := fakeFusermount(t, tc.stderr, tc.code)
			err := fusermountUnmount("/m/x", tc.lazy)
			if got := errText(err); got != tc.want {
				t.Errorf("error %q, want %q", got, tc.want)
			}
			if errors.Is(err, syscall.EBUSY) != tc.wantBusy {
				t.Errorf("error %v: EBUSY %v, want %v", err, !tc.wantBusy, tc.wantBusy)
			}
			if b, err := os.ReadFile(args); err != nil || strings.TrimSpace(string(b)) != tc.wantArgs {
				t.Errorf("fusermount3 ran with %q (%v), want %q", b, err, tc.wantArgs)
			}
		})
	}
}

func TestIsDeadOnlyForADeadMount(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Join(dir, "missing")} {
		if isDead(d, liveTimeout) {
			t.Errorf("isDead(%s) = true for a path that is no mount", d)
		}
	}
	if cleaned, err := CleanStale(dir); cleaned || err != nil {
		t.Errorf("CleanStale of a plain directory = %v, %v", cleaned, err)
	}
}
