package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// clkTck is USER_HZ, the unit of the times in /proc/<pid>/stat and
// /proc/stat (100 on every Linux architecture Go supports).
const clkTck = 100

// procCPU returns the CPU seconds (user + system) process pid has used,
// and false when it does not exist (or is a zombie).
func procCPU(pid int) (float64, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 || f[0] == "Z" || f[0] == "X" {
		return 0, false
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / clkTck, true
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	_, ok := procCPU(pid)
	return ok
}

// procStatus returns a kB field of /proc/<pid>/status (VmRSS, VmHWM) in bytes.
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return -1
}

// selfCPU returns the CPU seconds this test process has used.
func selfCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return tv(ru.Utime) + tv(ru.Stime)
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// machineCPU returns the busy and total CPU seconds of the whole machine
// (all cores) from /proc/stat.
func machineCPU() (busy, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, 0
	}
	var idle float64
	for i, s := range f[1:] {
		if i >= 8 { // guest times are included in user already
			break
		}
		v, _ := strconv.ParseFloat(s, 64)
		total += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	return (total - idle) / clkTck, total / clkTck
}

// findPid returns the pid of a process whose command line has an
// argument equal to arg and whose executable's base name is exe.
func findPid(exe, arg string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if filepath.Base(args[0]) != exe {
			continue
		}
		for _, a := range args[1:] {
			if a == arg {
				return pid
			}
		}
	}
	return 0
}

// dropCaches writes dirty pages back and drops the kernel's page cache,
// dentries and inodes.
func dropCaches(t testing.TB) {
	t.Helper()
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o200); err != nil {
		t.Fatalf("drop caches: %v", err)
	}
}

// cmdResult is one finished external command.
type cmdResult struct {
	stdout, stderr string
	wall           time.Duration
	cpu            float64 // user + system seconds of the process and the children it waited for
	err            error
}

// run runs name with args, bounded by timeout, and returns its output,
// wall time and CPU time. env is added to the environment.
func run(timeout time.Duration, env []string, name string, args ...string) cmdResult {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	// Its own process group, killed as a whole on timeout: a pipeline
	// (sh -c "find | wc") must not leave a find holding the mount busy.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	r := cmdResult{stdout: out.String(), stderr: errb.String(), wall: time.Since(start), err: err}
	if ps := cmd.ProcessState; ps != nil {
		r.cpu = ps.UserTime().Seconds() + ps.SystemTime().Seconds()
	}
	if err != nil && ctx.Err() != nil {
		r.err = fmt.Errorf("%s: timed out after %v: %w", name, timeout, err)
	}
	return r
}

// procAll returns the CPU seconds and command name of every process.
func procAll() map[int]procTime {
	out := map[int]procTime{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i, j := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if i < 0 || j < i {
			continue
		}
		f := strings.Fields(string(b[j+1:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		out[pid] = procTime{comm: string(b[i+1 : j]), cpu: (u + st) / clkTck}
	}
	return out
}

type procTime struct {
	comm string
	cpu  float64
}
