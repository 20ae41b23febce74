package mount

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/mountstatus"
)

// ErrDaemonBusy is wrapped by UnmountAndWait's error when the mount is
// gone but its daemon had not finished within the wait.
var ErrDaemonBusy = errors.New("still writing the run record")

// UnmountAndWait is Unmount followed, for a pinfs mount, by a wait of at
// most wait for its daemon to finish: to write the consumed set and
// run_end to the run record and exit. So pinfs run show right after
// pinfs unmount sees the whole run, not one still ending. It asks the
// mount for the daemon's pid first (pinfs status, bounded by a second);
// a mount that does not answer is unmounted without a wait. A daemon that
// answers but is not ready (the store refused its last fetch, say: pinfs
// status exits 1) still writes run_end, and is waited for. A lazy
// unmount does not wait: with files open the daemon serves on.
func UnmountAndWait(ctx context.Context, dir string, lazy bool, wait time.Duration) error {
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	st, _ := mountstatus.Query(qctx, dir) // a pid only from a daemon that answered
	cancel()
	if err := Unmount(dir, lazy); err != nil {
		return err
	}
	if st == nil || st.PID <= 0 || st.PID == os.Getpid() || lazy {
		return nil
	}
	end := time.NewTimer(wait)
	defer end.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for alive(st.PID) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-end.C:
			return fmt.Errorf("unmounted %s, but its pinfs daemon (pid %d) is %w after %v", dir, st.PID, ErrDaemonBusy, wait)
		case <-tick.C:
		}
	}
	return nil
}

// alive reports whether process pid exists and has not exited (a zombie
// whose parent has not reaped it yet has exited).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}
