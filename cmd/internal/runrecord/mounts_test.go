package runrecord

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// at is t0 plus m minutes.
func at(m float64) time.Time { return t0.Add(time.Duration(m * float64(time.Minute))) }

// ev is an event of run r at minute m from host/pid; seq counts per call site.
func ev(r, kind string, m float64, host string, pid int, seq int64) Event {
	return Event{Time: at(m), RunID: r, Digest: digestA, Event: kind, Seq: seq, Host: host, PID: pid}
}

// knows is a Liveness that knows the processes in alive (host/pid -> alive)
// and nothing of other hosts than "h1".
func knows(alive map[int]bool) Liveness {
	return func(m *Mount) (bool, bool) {
		if m.Host != "h1" {
			return false, false
		}
		return alive[m.PID], true
	}
}

func mountStates(ms []Mount) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.State)
	}
	return strings.Join(s, ",")
}

func TestMountsAndStates(t *testing.T) {
	start := func(m float64, host string, pid int, flush string, resume bool) Event {
		kind := RunStart
		if resume {
			kind = Resume
		}
		e := ev("r", kind, m, host, pid, 1)
		e.FlushInterval = flush
		e.Store = "s3://data/x"
		return e
	}
	end := func(m float64, host string, pid int, opened int64) Event {
		e := ev("r", RunEnd, m, host, pid, 9)
		e.Totals = &Totals{MembersOpened: opened}
		return e
	}
	cases := []struct {
		name   string
		events []Event
		permit bool
		now    float64
		mounts string
		state  string
	}{
		{"ended", []Event{start(0, "h1", 10, "1m", false), end(5, "h1", 10, 3)}, false, 60, "ended", StateEnded},
		{"alive on this host", []Event{start(0, "h1", 10, "1m", false)}, false, 600, "running", StateRunning},
		{"dead on this host, although it wrote just now", []Event{start(0, "h1", 11, "1m", false), ev("r", ConsumedSet, 59.9, "h1", 11, 2)}, false, 60, "crashed", StateCrashed},
		{"other host, young last event", []Event{start(0, "h2", 10, "1m", false), ev("r", ConsumedSet, 58, "h2", 10, 2)}, false, 60, "running", StateRunning},
		{"other host, old last event", []Event{start(0, "h2", 10, "1m", false), ev("r", ConsumedSet, 56, "h2", 10, 2)}, false, 60, "crashed", StateCrashed},
		{"other host, old record: 5 minute default", []Event{start(0, "h2", 10, "", false), ev("r", ConsumedSet, 46, "", 0, 2)}, false, 60, "running", StateRunning},
		{"other host, old record, silent 15 minutes", []Event{start(0, "h2", 10, "", false), ev("r", ConsumedSet, 45, "", 0, 2)}, false, 60, "crashed", StateCrashed},
		{"one mount running wins", []Event{start(0, "h1", 11, "1m", false), start(1, "h1", 10, "1m", true)}, false, 60, "crashed,running", StateRunning},
		{"crashed beats ended", []Event{start(0, "h1", 11, "1m", false), start(1, "h1", 12, "1m", true), end(2, "h1", 12, 1)}, false, 60, "crashed,ended", StateCrashed},
		{"admitted", []Event{ev("r", PermitEvent, 0, "h1", 99, 1)}, true, 60, "", StateAdmitted},
		{"admitted and mounted", []Event{ev("r", PermitEvent, 0, "h1", 99, 1), start(1, "h1", 12, "1m", false), end(2, "h1", 12, 1)}, true, 60, "ended", StateEnded},
		{"bound, never started", nil, false, 60, "", StateCrashed},
	}
	alive := knows(map[int]bool{10: true})
	for _, c := range cases {
		r := &Run{RunID: "r", Events: c.events}
		if c.permit {
			r.Permit = &Permit{Digest: digestA}
		}
		ms := r.Mounts(at(c.now), alive)
		if got := mountStates(ms); got != c.mounts {
			t.Errorf("%s: mount states %q, want %q", c.name, got, c.mounts)
		}
		if got := r.State(at(c.now), alive); got != c.state {
			t.Errorf("%s: state %q, want %q", c.name, got, c.state)
		}
	}
}

// TestMountsAttribution: events name their mount by host and pid, so two
// concurrent mounts keep their own last event and run_end; events of old
// records (no host, no pid) go to the most recent open mount.
func TestMountsAttribution(t *testing.T) {
	a := ev("r", RunStart, 0, "h2", 10, 1)
	a.FlushInterval = "1m"
	a.Store = "s3://data/x"
	b := ev("r", Resume, 1, "h3", 20, 1)
	b.FlushInterval = "2m"
	endB := ev("r", RunEnd, 5, "h3", 20, 3)
	endB.Totals = &Totals{MembersOpened: 7}
	r := &Run{RunID: "r", Events: []Event{a, b, ev("r", ConsumedSet, 2, "h2", 10, 2), ev("r", ConsumedSet, 4, "h3", 20, 2), endB}}
	ms := r.Mounts(at(4.5), nil) // 2.5 intervals after the first mount's last event
	if len(ms) != 2 {
		t.Fatalf("%d mounts, want 2: %+v", len(ms), ms)
	}
	m0, m1 := ms[0], ms[1]
	if m0.Host != "h2" || m0.PID != 10 || m0.Resumed || !m0.Start.Equal(at(0)) || !m0.Last.Equal(at(2)) || m0.End != nil ||
		m0.Store != "s3://data/x" || m0.FlushInterval != time.Minute || m0.State != StateRunning {
		t.Errorf("first mount %+v", m0)
	}
	if m1.Host != "h3" || !m1.Resumed || m1.End == nil || !m1.End.Equal(at(5)) || m1.Totals == nil || m1.Totals.MembersOpened != 7 ||
		!m1.Last.Equal(at(5)) || m1.FlushInterval != 2*time.Minute || m1.State != StateEnded {
		t.Errorf("second mount %+v", m1)
	}

	// An old record: only run_start and resume name their process.
	old := &Run{RunID: "r", Events: []Event{
		ev("r", RunStart, 0, "h2", 10, 1), ev("r", ConsumedSet, 1, "", 0, 2), ev("r", RunEnd, 2, "", 0, 3),
		ev("r", Resume, 3, "h2", 11, 1), ev("r", Mismatch, 4, "", 0, 2),
	}}
	ms = old.Mounts(at(30), nil)
	if len(ms) != 2 || ms[0].End == nil || !ms[0].End.Equal(at(2)) || ms[1].End != nil || !ms[1].Last.Equal(at(4)) || ms[1].State != StateCrashed {
		t.Fatalf("old record mounts %+v", ms)
	}
}

func TestLocalLiveness(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	live := func(pid int) (bool, bool) { return LocalLiveness(&Mount{Host: host, PID: pid, Start: time.Now()}) }
	if a, known := live(os.Getpid()); !a || !known {
		t.Errorf("this process: alive %v known %v", a, known)
	}
	if a, known := live(1); !a || !known {
		t.Errorf("pid 1 (EPERM or alive): alive %v known %v", a, known)
	}
	if a, known := live(deadPID(t)); a || !known {
		t.Errorf("a dead process: alive %v known %v", a, known)
	}
	if _, known := LocalLiveness(&Mount{Host: host + "-elsewhere", PID: os.Getpid()}); known {
		t.Error("another host's process is known")
	}
}

// A mount killed and not yet reaped is a zombie: kill(pid, 0) succeeds on
// it, yet it serves nothing (issue 22, item 10).
func TestLocalLivenessZombieIsDead(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command("sleep", "60")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Wait() // reaps it at the end
	pid := c.Process.Pid
	m := &Mount{Host: host, PID: pid, Proc: procOf(t, pid), Start: time.Now()}
	if a, known := LocalLiveness(m); !a || !known {
		t.Fatalf("the child, running: alive %v known %v", a, known)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for st, _ := readProcStat(pid); st.state != 'Z'; st, _ = readProcStat(pid) {
		if ctx.Err() != nil {
			t.Fatalf("the killed child is not a zombie: state %q", st.state)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("kill(zombie, 0) = %v; the test needs it to succeed, as on Linux", err)
	}
	if a, known := LocalLiveness(m); a || !known {
		t.Fatalf("a killed, unreaped mount: alive %v known %v; want dead", a, known)
	}
}

// A live process that is not the mount's (its pid was reused) does not
// keep the mount running: by the identity its run_start records, or, in an
// older record without it, by starting after the mount did.
func TestLocalLivenessReusedPID(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	me := procOf(t, os.Getpid())
	boot, _, _ := strings.Cut(me, "/")
	for _, tc := range []struct {
		name  string
		m     Mount
		alive bool
	}{
		{"its own start time", Mount{Proc: me}, true},
		{"another start time", Mount{Proc: boot + "/1"}, false},
		{"another boot", Mount{Proc: "00000000-0000-0000-0000-000000000000/" + strings.TrimPrefix(me, boot+"/")}, false},
		{"no identity, the mount started after the process", Mount{Start: time.Now()}, true},
		{"no identity, the mount started before the process", Mount{Start: time.Now().Add(-24 * time.Hour)}, false},
	} {
		tc.m.Host, tc.m.PID = host, os.Getpid()
		if a, known := LocalLiveness(&tc.m); a != tc.alive || !known {
			t.Errorf("%s: alive %v known %v; want alive %v", tc.name, a, known, tc.alive)
		}
	}
}

// procOf returns the identity run_start records for process pid.
func procOf(t testing.TB, pid int) string {
	t.Helper()
	st, err := readProcStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	id := procIdentity(st)
	if id == "" {
		t.Fatal("no boot id")
	}
	return id
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t testing.TB) int {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid
}
