package mountstatus

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pinfs/pinfs/fs/mountinfo"
)

// MountsOf returns the mountpoints of the pinfs mounts of snapshot digest
// in this process's mount table, in its order, each once: where the mounts
// of a run on this host can be asked. It never touches a mountpoint.
func MountsOf(digest string) ([]string, error) {
	es, err := mountsOf(digest)
	if err != nil {
		return nil, err
	}
	dirs := make([]string, len(es))
	for i, e := range es {
		dirs[i] = e.Point
	}
	return dirs, nil
}

// mountsOf is MountsOf with each mount's table entry: of a point listed
// more than once, the topmost entry, the one a getxattr of it reaches.
func mountsOf(digest string) ([]mountinfo.Entry, error) {
	all, err := mountinfo.All(mountinfoPath)
	if err != nil {
		return nil, err
	}
	var es []mountinfo.Entry
	for _, e := range all {
		i := slices.IndexFunc(es, func(x mountinfo.Entry) bool { return x.Point == e.Point })
		switch {
		case e.FSType == FSType && e.Source == digest && i < 0:
			es = append(es, e)
		case i >= 0:
			es[i] = e // mounted over it
		}
	}
	return slices.DeleteFunc(es, func(e mountinfo.Entry) bool { return e.FSType != FSType || e.Source != digest }), nil
}

// RunMount is a pinfs mount of this host that answered that it serves a
// run: its mountpoint and its status.
type RunMount struct {
	Dir    string
	Status *Status
	// Until is when the timeout of MountsOfRun ends for this mount, which
	// began when its status was asked: a caller that asks it more (its
	// consumed set) gives it no longer in all.
	Until time.Time
}

// MountsOfRun asks the pinfs mounts of snapshot digest in this process's
// mount table (MountsOf) for their status, each within timeout, and
// returns those that answered serving run runID, in the table's order. A
// daemon that answered but does not count as serving (Query's error: its
// store refused its last fetch, say) still counts what it served and is
// returned; one that does not answer in time is left out.
//
// Anyone may mount a FUSE file system of type fuse.pinfs named like a
// digest and answer what it likes, the pid of the run's mount included. A
// mount is returned only when the uid that mounted it (the table's
// user_id, which the kernel records) is the real or effective uid of the
// process whose pid its status gives: what it says is the word of that
// process's user, the user that serves the run.
func MountsOfRun(ctx context.Context, digest, runID string, timeout time.Duration) []RunMount {
	es, err := mountsOf(digest)
	if err != nil {
		return nil
	}
	var ms []RunMount
	for _, e := range es {
		until := time.Now().Add(timeout)
		qctx, cancel := context.WithDeadline(ctx, until)
		st, _ := Query(qctx, e.Point)
		cancel()
		if st == nil || st.RunID != runID || !mountedBy(e, st.PID) {
			continue
		}
		ms = append(ms, RunMount{Dir: e.Point, Status: st, Until: until})
	}
	return ms
}

// procStatus is the status file of process pid; tests point it elsewhere.
var procStatus = func(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/status" }

// mountedBy reports whether the mount of table entry e was made by the
// user of process pid: e's user_id is the process's real or effective
// uid.
func mountedBy(e mountinfo.Entry, pid int) bool {
	if e.UserID == "" || pid <= 0 {
		return false
	}
	b, err := os.ReadFile(procStatus(pid))
	if err != nil {
		return false
	}
	for l := range strings.Lines(string(b)) {
		if ids, ok := strings.CutPrefix(l, "Uid:"); ok {
			f := strings.Fields(ids) // real, effective, saved set, file system
			return len(f) >= 2 && (f[0] == e.UserID || f[1] == e.UserID)
		}
	}
	return false
}
