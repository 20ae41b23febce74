package fs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestDeviceError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&os.PathError{Op: "open", Path: "/dev/fuse", Err: syscall.ENOENT},
			"cannot open /dev/fuse: it does not exist (load the fuse module, or pass the device to the container: --device /dev/fuse)"},
		{&os.PathError{Op: "open", Path: "/dev/fuse", Err: syscall.EACCES},
			"cannot open /dev/fuse: permission denied (make it rw for this user, mode 0666, or mount as root)"},
		{&os.PathError{Op: "open", Path: "/dev/fuse", Err: syscall.EPERM}, // a container's device cgroup
			"cannot open /dev/fuse: permission denied (make it rw for this user, mode 0666, or mount as root)"},
		{&os.PathError{Op: "open", Path: "/dev/fuse", Err: syscall.ENODEV},
			"cannot open /dev/fuse: no such device"},
	} {
		if got := deviceError("/dev/fuse", tc.err).Error(); got != tc.want {
			t.Errorf("deviceError(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestUserAllowOther(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		conf string
		want bool
	}{
		{"user_allow_other\n", true},
		{"# comment\n  user_allow_other  \nmount_max = 1000\n", true},
		{"user_allow_other # allow it\n", true},
		{"#user_allow_other\n", false},
		{"mount_max = 1000\n", false},
		{"", false},
	} {
		p := filepath.Join(dir, "fuse.conf")
		if err := os.WriteFile(p, []byte(tc.conf), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := userAllowOther(p); got != tc.want {
			t.Errorf("userAllowOther(%q) = %v, want %v", tc.conf, got, tc.want)
		}
	}
	if userAllowOther(filepath.Join(dir, "missing")) {
		t.Error("a missing fuse.conf allows other")
	}
}

func TestPrecheck(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "fuse") // a file stands in for the device
	if err := os.WriteFile(dev, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "fuse.conf")
	if err := os.WriteFile(conf, []byte("#user_allow_other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	allow := MountOptions{AllowOther: true}
	for _, tc := range []struct {
		name, dev string
		uid       int
		o         MountOptions
		want      string
	}{
		{"ok", dev, 1000, MountOptions{}, ""},
		{"no device", filepath.Join(dir, "missing"), 1000, MountOptions{},
			"cannot open " + filepath.Join(dir, "missing") + ": it does not exist (load the fuse module, or pass the device to the container: --device /dev/fuse)"},
		{"allow other as a user", dev, 1000, allow,
			"--allow-other as a user other than root needs a line user_allow_other in " + conf + " (or mount as root)"},
		{"allow other as root", dev, 0, allow, ""},
	} {
		err := precheck(tc.dev, conf, tc.uid, tc.o)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: precheck = %q, want %q", tc.name, got, tc.want)
		}
	}
	if err := os.WriteFile(conf, []byte("user_allow_other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := precheck(dev, conf, 1000, allow); err != nil {
		t.Errorf("allow other as a user with user_allow_other: %v", err)
	}
}

func TestMountErrorIsOneLine(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errors.New("fusermount exited with code 256\n"),
			"fusermount could not mount (its own message is just before this line, on stderr or in the mount log)"},
		{errors.New("bad\nthing "), "bad thing"},
		{syscall.EINVAL, "invalid argument"},
	} {
		err := mountError(tc.err)
		if err.Error() != tc.want || strings.Contains(err.Error(), "256") {
			t.Errorf("mountError(%q) = %q, want %q", tc.err, err, tc.want)
		}
	}
	if !errors.Is(mountError(syscall.EINVAL), syscall.EINVAL) {
		t.Error("mountError loses the errno")
	}
}
