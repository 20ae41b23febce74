package runrecord

import (
	"time"

	"github.com/pinfs/pinfs/cmd/internal/buildinfo"
)

// Run states (Run.State, Mount.State).
const (
	StateRunning  = "running"  // a mount of the run is serving it
	StateEnded    = "ended"    // every mount wrote run_end
	StateCrashed  = "crashed"  // a mount stopped without run_end, none is running
	StateAdmitted = "admitted" // the run holds a permit and was never mounted
)

// oldFlushInterval is the consumed period of records that do not say
// theirs (written before issue 9).
const oldFlushInterval = 5 * time.Minute

// silentIntervals is how many flush intervals a mount whose process
// cannot be checked may stay silent and still count as running.
const silentIntervals = 3

// Mount is one process that served the run: from its run_start/resume to its run_end.
type Mount struct {
	Host          string          `json:"host"`
	PID           int             `json:"pid"`
	Start         time.Time       `json:"start"`
	Resumed       bool            `json:"resume"`
	End           *time.Time      `json:"end,omitempty"`       // run_end time; nil if none
	Last          time.Time       `json:"last"`                // its latest event
	LastFlush     time.Time       `json:"last_flush,omitzero"` // its latest consumed event: what the record knows of its reads is as of then
	Store         string          `json:"store,omitempty"`
	Pinfs         *buildinfo.Info `json:"pinfs,omitempty"` // the build that served it (Event.Pinfs); nil in older records
	Proc          string          `json:"-"`               // the process's identity on its host (Event.Proc); "" in older records
	FlushInterval time.Duration   `json:"-"`
	Totals        *Totals         `json:"totals,omitempty"` // from its run_end
	State         string          `json:"state"`            // running | ended | crashed
}

// Liveness reports whether the process of mount m is alive; known=false
// when it cannot tell (another host). See LocalLiveness.
type Liveness func(m *Mount) (alive, known bool)

// Mounts returns the run's mounts in the order they started, each with
// its state at now. A run_start or resume starts a mount; an event names
// its mount by host and pid (the latest mount of that process started
// before it), and an event that names none, as in records written before
// issue 9, or names a process with no mount, belongs to the most recent
// mount still open (else the most recent one); a run_end ends its mount.
// A mount without run_end is running if alive says its process is alive,
// crashed if alive says it is dead; if alive cannot tell (or is nil), it
// is running while its last event is younger than 3 × its flush interval
// (5 minutes when the record does not say), else crashed.
func (r *Run) Mounts(now time.Time, alive Liveness) []Mount {
	var ms []Mount
	type proc struct {
		host string
		pid  int
	}
	latest := map[proc]int{} // the latest mount of each process
	for i := range r.Events {
		e := &r.Events[i]
		if e.Event == PermitEvent {
			continue
		}
		if e.Event == RunStart || e.Event == Resume {
			m := Mount{Host: e.Host, PID: e.PID, Proc: e.Proc, Start: e.Time, Resumed: e.Event == Resume, Last: e.Time, Store: e.Store, Pinfs: e.Pinfs}
			m.FlushInterval, _ = time.ParseDuration(e.FlushInterval)
			ms = append(ms, m)
			if e.Host != "" || e.PID != 0 {
				latest[proc{e.Host, e.PID}] = len(ms) - 1
			}
			continue
		}
		j, ok := latest[proc{e.Host, e.PID}]
		if !ok || e.Host == "" && e.PID == 0 {
			j = openMount(ms)
		}
		if j < 0 {
			continue // no mount to charge it to
		}
		m := &ms[j]
		if e.Time.After(m.Last) {
			m.Last = e.Time
		}
		if e.Event == ConsumedSet && e.Time.After(m.LastFlush) {
			m.LastFlush = e.Time
		}
		if e.Event == RunEnd && m.End == nil {
			end := e.Time
			m.End, m.Totals = &end, e.Totals
		}
	}
	for i := range ms {
		ms[i].State = ms[i].state(now, alive)
	}
	return ms
}

// openMount returns the index of the most recent mount without run_end,
// else of the most recent mount, else -1.
func openMount(ms []Mount) int {
	for j := len(ms) - 1; j >= 0; j-- {
		if ms[j].End == nil {
			return j
		}
	}
	return len(ms) - 1
}

// state is m's state at now (see Mounts).
func (m *Mount) state(now time.Time, alive Liveness) string {
	if m.End != nil {
		return StateEnded
	}
	if alive != nil {
		if a, known := alive(m); known {
			if a {
				return StateRunning
			}
			return StateCrashed
		}
	}
	if now.Sub(m.Last) < silentIntervals*m.interval() {
		return StateRunning
	}
	return StateCrashed
}

// interval is m's flush interval, oldFlushInterval when its record does
// not say.
func (m *Mount) interval() time.Duration {
	if m.FlushInterval <= 0 {
		return oldFlushInterval
	}
	return m.FlushInterval
}

// State returns the run's state at now: running if any mount is, else
// crashed if any mount is, else ended; a run that holds a permit and has
// no mount is admitted. A run with neither a mount nor a permit (its
// binding was made, its mount stopped before run_start was stored) is
// crashed: it has no run_end and no live process.
func (r *Run) State(now time.Time, alive Liveness) string {
	return StateOf(r.Mounts(now, alive), r.Permit != nil)
}

// StateOf is Run.State over the run's mounts ms (Run.Mounts), for a run
// that holds a permit when permit is true.
func StateOf(ms []Mount, permit bool) string {
	if len(ms) == 0 {
		if permit {
			return StateAdmitted
		}
		return StateCrashed
	}
	state := StateEnded
	for _, m := range ms {
		switch m.State {
		case StateRunning:
			return StateRunning
		case StateCrashed:
			state = StateCrashed
		}
	}
	return state
}
