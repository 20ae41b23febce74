package mount

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pinfs/pinfs/fs/mountinfo"
)

// CleanStale detaches a dead FUSE mount at dir: one whose daemon is gone,
// so that every access fails with ENOTCONN. It reports whether it did.
// When umount(2) is not permitted (not root) it asks fusermount3 -u -z,
// which lets a user remove the mounts that user made.
func CleanStale(dir string) (bool, error) {
	if !isDead(dir, liveTimeout) {
		return false, nil
	}
	err := syscall.Unmount(dir, syscall.MNT_DETACH)
	if errors.Is(err, syscall.EPERM) {
		err = fusermountUnmount(dir, true)
	}
	if err != nil {
		return false, fmt.Errorf("removing the dead mount at %s: %w", dir, err)
	}
	return true, nil
}

// Unmount unmounts dir. With lazy, a busy mount is detached at once and
// goes away when its last file is closed. When umount(2) is not permitted
// (not root) it asks fusermount3 -u (-z when lazy), which lets a user
// unmount the mounts that user made. Its errors are one line: a busy
// mount, a dir that is not mounted, or fusermount's own message.
func Unmount(dir string, lazy bool) error {
	err := syscall.Unmount(dir, 0)
	if errors.Is(err, syscall.EBUSY) && lazy {
		err = syscall.Unmount(dir, syscall.MNT_DETACH)
	}
	if errors.Is(err, syscall.EPERM) {
		if _, ok := mountinfo.At(mountinfo.Canonical(dir)); !ok {
			err = syscall.EINVAL // what umount(2) says of a dir that is not a mount
		} else {
			err = fusermountUnmount(dir, lazy)
		}
	}
	if err != nil {
		return unmountError(dir, err)
	}
	return nil
}

// unmountError is the one-line error of unmounting dir that failed with err.
func unmountError(dir string, err error) error {
	var msg string
	switch {
	case errors.Is(err, syscall.EBUSY):
		msg = "mount is busy (files are open); use --lazy to detach it now"
	case errors.Is(err, syscall.EINVAL):
		msg = "not mounted"
	case errors.Is(err, syscall.ENOENT):
		msg = "it does not exist"
	default:
		msg = err.Error()
	}
	return &oneLine{msg: "unmount " + dir + ": " + msg, err: err}
}

// oneLine is an error whose text is msg and which wraps err, so that
// errors.Is still finds the errno behind a message meant for a person.
type oneLine struct {
	msg string
	err error
}

func (e *oneLine) Error() string { return e.msg }
func (e *oneLine) Unwrap() error { return e.err }

// fusermountTimeout bounds a fusermount run: it unmounts without asking
// the daemon anything, so it returns at once unless the system is stuck.
const fusermountTimeout = 30 * time.Second

// fusermountUnmount unmounts dir with fusermount3 -u (or fusermount when
// fusermount3 is not installed), lazily with -z. A failure is fusermount's
// own message on one line; a busy mount wraps EBUSY.
func fusermountUnmount(dir string, lazy bool) error {
	bin, err := fusermountBinary()
	if err != nil {
		return fmt.Errorf("not permitted as uid %d, and neither fusermount3 nor fusermount is installed (install fuse3): %w",
			os.Getuid(), syscall.EPERM)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	args := []string{"-u"}
	if lazy {
		args = append(args, "-z")
	}
	ctx, cancel := context.WithTimeout(context.Background(), fusermountTimeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append(args, "--", dir)...)
	cmd.Stderr = &stderr
	err = cmd.Run()
	if err == nil {
		return nil
	}
	msg := strings.Join(strings.Fields(stderr.String()), " ")
	if strings.Contains(strings.ToLower(msg), syscall.EBUSY.Error()) { // strerror(EBUSY)
		return syscall.EBUSY
	}
	if msg == "" {
		msg = filepath.Base(bin) + ": " + err.Error()
	}
	return &oneLine{msg: msg, err: err}
}

// fusermountBinary returns the path of fusermount3, or of fusermount when
// fusermount3 is not installed, from $PATH or else /bin (as go-fuse
// finds it to mount).
func fusermountBinary() (string, error) {
	var err error
	for _, name := range []string{"fusermount3", "fusermount"} {
		var p string
		if p, err = exec.LookPath(name); err == nil {
			return p, nil
		}
		if p, err = exec.LookPath(filepath.Join("/bin", name)); err == nil {
			return p, nil
		}
	}
	return "", err
}

// CheckMountpoint returns a one-line error when dir cannot be mounted on:
// it does not exist, is not a directory, or is already a live pinfs
// mount. A dead mount is not an error (CleanStale removes it), nor is a
// mount of another type (a Kubernetes emptyDir, for one): pinfs mounts
// over it. With create (pinfs mount --mkdir, as mount(8) -m), a dir that
// does not exist is made, with its missing parents, mode 0755 as mkdir -p
// makes them.
func CheckMountpoint(dir string, create bool) error {
	return checkMountpoint(mountinfo.Self, dir, create)
}

// liveTimeout bounds the probe that tells a live mount from a dead one
// (isDead): a daemon that does not answer is not dead.
const liveTimeout = 5 * time.Second

// checkMountpoint is CheckMountpoint with the mounts listed in the mount
// table at table. A table that cannot be read lists no mount.
func checkMountpoint(table, dir string, create bool) error {
	if e, ok, _ := mountinfo.AtFile(table, mountinfo.Canonical(dir)); ok && e.FSType == "fuse.pinfs" {
		if isDead(dir, liveTimeout) {
			return nil
		}
		return fmt.Errorf("mountpoint %s is already mounted (pinfs %s); unmount it first: pinfs unmount %s", dir, e.Source, dir)
	}
	fi, err := os.Stat(dir)
	var pe *fs.PathError
	switch {
	case err == nil && !fi.IsDir():
		return fmt.Errorf("mountpoint %s is not a directory", dir)
	case err == nil, dead(err):
		return nil
	case errors.Is(err, fs.ErrNotExist) && create:
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return &oneLine{msg: fmt.Sprintf("mountpoint %s: creating it: %v", dir, err), err: err}
		}
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("mountpoint %s does not exist: create it with mkdir -p %s, or pass --mkdir", dir, dir)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("mountpoint %s does not exist (a parent is not a directory)", dir)
	case errors.As(err, &pe):
		return &oneLine{msg: fmt.Sprintf("mountpoint %s: %v", dir, pe.Err), err: err}
	}
	return fmt.Errorf("mountpoint %s: %w", dir, err)
}

// dead reports whether err is what a FUSE mount whose daemon is gone
// answers.
func dead(err error) bool {
	return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED)
}

// isDead reports whether dir is a FUSE mount whose daemon is gone. It
// asks with statfs(2), which the kernel always sends to the daemon (a
// stat may be answered from the attribute cache, which pinfs keeps for
// a day), and with stat. A daemon that has not answered within timeout
// is not dead (the probe is left to finish on its own).
//
// A mount of another user without allow_other answers statfs without
// asking its daemon, and stat with EACCES: such a dead mount looks live.
func isDead(dir string, timeout time.Duration) bool {
	done := make(chan bool, 1)
	go func() {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); dead(err) {
			done <- true
			return
		}
		_, err := os.Stat(dir)
		done <- dead(err)
	}()
	select {
	case d := <-done:
		return d
	case <-time.After(timeout):
		return false
	}
}
