package runrecord

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of a process's start time in
// /proc/PID/stat: 100 on every architecture Linux runs Go on.
const clockTicks = 100

// startSlack is how much later than its mount's run_start or resume a
// process may seem to have started and still be taken for that mount, in
// a record that does not name the process (see Event.Proc): the boot time
// the kernel gives is in whole seconds.
const startSlack = 2 * time.Second

// procStat is what LocalLiveness reads of a process in /proc/PID/stat.
type procStat struct {
	state byte   // field 3: R, S, D, Z (zombie), X (dead), ...
	start uint64 // field 22: the start time, in clock ticks since boot
}

// readProcStat reads /proc/pid/stat. Its error wraps fs.ErrNotExist when
// there is no such process.
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	// The command name, field 2, is in parentheses and may hold anything:
	// the fields after it follow the last ')'.
	k := bytes.LastIndexByte(b, ')')
	if k < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[k+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want 20 or more", pid, len(f))
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	return procStat{state: f[0][0], start: start}, nil
}

// bootID returns the kernel's boot id, "" if it cannot be read.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// procIdentity returns what names process st on this host for as long as
// the host runs (see Event.Proc), "" if the boot id cannot be read.
func procIdentity(st procStat) string {
	id := bootID()
	if id == "" {
		return ""
	}
	return id + "/" + strconv.FormatUint(st.start, 10)
}

// selfIdentity returns procIdentity of this process, "" without /proc.
func selfIdentity() string {
	st, err := readProcStat(os.Getpid())
	if err != nil {
		return ""
	}
	return procIdentity(st)
}

// bootTime returns when this host booted, from btime in /proc/stat.
func bootTime() (time.Time, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("/proc/stat: btime: %w", err)
			}
			return time.Unix(s, 0), nil
		}
	}
	return time.Time{}, errors.New("/proc/stat: no btime")
}

// LocalLiveness is the Liveness of this host. Of another host's process
// it knows nothing. A process of this host (its hostname) is alive when
// /proc/PID/stat shows it neither a zombie nor dead (a mount killed and
// not yet reaped is a zombie, which kill(pid, 0) would take for alive),
// and it is the mount's process: it has the start time m.Proc records, or,
// in a record that does not name the process, it started no later than
// the mount's run_start or resume (a pid reused after the mount died
// started after it). Without /proc it asks kill(pid, 0), where EPERM
// (another user's process) counts as alive.
func LocalLiveness(m *Mount) (alive, known bool) {
	if m.PID <= 0 || m.Host == "" {
		return false, false
	}
	if me, err := os.Hostname(); err != nil || me != m.Host {
		return false, false
	}
	st, err := readProcStat(m.PID)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, true
	case err != nil:
		err := syscall.Kill(m.PID, 0)
		return err == nil || errors.Is(err, syscall.EPERM), true
	case st.state == 'Z' || st.state == 'X' || st.state == 'x':
		return false, true
	case m.Proc != "":
		return procIdentity(st) == m.Proc, true
	}
	boot, err := bootTime()
	if err != nil {
		return true, true // alive, and nothing tells it is another process
	}
	started := boot.Add(time.Duration(st.start) * time.Second / clockTicks)
	return !started.After(m.Start.Add(startSlack)), true
}
