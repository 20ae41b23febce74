package mount

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// readyEnv names the environment variable that carries the file
// descriptor a background mount reports readiness on.
const readyEnv = "PINFS_READY_FD"

// Background starts this binary again with args (a foreground mount),
// detached in its own session with stderr appended to logPath (stdout
// discarded)
// (created 0600, never through a symbolic link), and waits until it
// reports that the mount serves, reports an error, or exits; at most
// timeout. It returns the child's pid and its run id.
func Background(args []string, logPath string, timeout time.Duration) (int, string, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, "", err
	}
	// Never through a symbolic link planted at logPath (os.OpenFile adds
	// O_CLOEXEC; the child gets the log as its stdout and stderr only).
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return 0, "", fmt.Errorf("%s is a symbolic link, which pinfs does not follow (remove it): %w", logPath, err)
	}
	if err != nil {
		return 0, "", err
	}
	defer log.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return 0, "", err
	}
	defer r.Close()
	cmd := exec.Command(self, args...)
	// The log gets the daemon's log lines only (one format, --log-format
	// json stays pure JSON); what it prints on stdout, the run id, this
	// process prints for it.
	cmd.Stderr = log
	cmd.ExtraFiles = []*os.File{w} // fd 3
	cmd.Env = append(os.Environ(), readyEnv+"=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return 0, "", err
	}
	w.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		if runID, ok := strings.CutPrefix(s, "ok "); ok {
			return cmd.Process.Pid, runID, nil
		}
		if msg, ok := strings.CutPrefix(s, "error: "); ok {
			return 0, "", errors.New(msg)
		}
		err := <-exited
		return 0, "", fmt.Errorf("mount process exited before it was ready (%v); see %s", err, logPath)
	case <-time.After(timeout):
		cmd.Process.Kill()
		return 0, "", fmt.Errorf("mount not ready after %v; see %s", timeout, logPath)
	}
}

// Notify tells a waiting parent (see Background) that the mount serves
// the run runID (err == nil) or failed. Only the first call speaks; it
// does nothing in a mount started directly with --foreground.
func Notify(runID string, err error) {
	fd, e := strconv.Atoi(os.Getenv(readyEnv))
	if e != nil {
		return
	}
	os.Unsetenv(readyEnv)
	f := os.NewFile(uintptr(fd), "ready")
	if f == nil {
		return
	}
	defer f.Close()
	if err != nil {
		fmt.Fprintf(f, "error: %s\n", strings.Join(strings.Fields(err.Error()), " "))
		return
	}
	fmt.Fprintln(f, "ok", runID)
}
