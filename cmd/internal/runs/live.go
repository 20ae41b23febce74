package runs

import (
	"context"
	"fmt"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/mountstatus"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/verify"
)

// LiveMount is what a mount of the run that serves on this host said when
// it was asked: its counters and its consumed set so far, which the
// record has only as of the mount's last flush.
type LiveMount struct {
	Mountpoint string
	PID        int
	Time       time.Time        // when it answered
	Totals     runrecord.Totals // its counters now, as its run_end will give them
	Set        *consumed.Set    // its consumed set so far; nil when Err says why not
	Err        error
}

// AskLive asks the pinfs mounts of run's snapshot in this process's mount
// table (mountstatus.MountsOfRun: the mounts of this host, in this mount
// namespace, made by the user of the process they say serves them) for
// their status, each within timeout, and those serving run.RunID for
// their consumed set too, which it decodes against t, the table of the
// run's snapshot. A mount that does not answer its status in time is left
// out: nothing tells whose run it serves; one that answers but does not
// count as serving (pinfs status exits 1) is not. It returns the mounts
// of the run that answered, in mount table order; an unreadable mount
// table gives none. What they answer is a report of now, never evidence:
// replay and export read the record only.
func AskLive(ctx context.Context, run *runrecord.Run, t *verify.Table, timeout time.Duration) []LiveMount {
	var live []LiveMount
	for _, m := range mountstatus.MountsOfRun(ctx, string(run.Digest), run.RunID, timeout) {
		l := LiveMount{Mountpoint: m.Dir, PID: m.Status.PID, Time: time.Now().UTC(), Totals: totalsOf(m.Status)}
		qctx, cancel := context.WithDeadline(ctx, m.Until) // one timeout for both questions
		text, at, err := mountstatus.QueryConsumed(qctx, m.Dir)
		cancel()
		if err == nil {
			l.Time = at
			l.Set, err = consumed.NewDecoder(t).Decode(text)
		}
		if err != nil {
			l.Set, l.Err = nil, fmt.Errorf("its consumed set: %w", err)
		}
		live = append(live, l)
	}
	return live
}

// totalsOf returns the run_end totals that status st counts so far.
func totalsOf(st *mountstatus.Status) runrecord.Totals {
	in := st.IntegrityEvents
	tot := runrecord.Totals{
		MembersOpened: st.MembersOpened, BytesServed: st.BytesServed, BlocksVerified: st.BlocksVerified,
		MemHits: st.CacheHits.Memory, DiskHits: st.CacheHits.Disk, NetworkFetches: st.NetworkFetches,
		Mismatches: in.Mismatch, VersionMissing: in.VersionMissing, FetchFailed: in.FetchFailed,
	}
	if st.Passthrough != nil {
		tot.PassthroughOpens = st.Passthrough.Opens
	}
	return tot
}
