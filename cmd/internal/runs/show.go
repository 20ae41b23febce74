package runs

import (
	"os"
	"slices"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/verify"
)

// Report is what `pinfs run show --json` prints: everything the record
// says about one run.
type Report struct {
	RunID    string            `json:"run_id"`
	Digest   verify.Digest     `json:"digest"`
	State    string            `json:"state"` // runrecord.StateRunning, ...
	Permit   *runrecord.Permit `json:"permit,omitempty"`
	Mounts   []MountReport     `json:"mounts"`
	Totals   runrecord.Totals  `json:"totals"`   // summed over the mounts' run_end totals and the live mounts' counters
	Consumed ConsumedReport    `json:"consumed"` // the record's, and the live mounts' so far
	// Passthrough is the members served by FUSE passthrough, as of each
	// mount's last flush; nil when there are none.
	Passthrough *PassthroughReport `json:"passthrough,omitempty"`
	Events      []EventReport      `json:"events"`            // the integrity events, in record order
	Integrity   map[string]*Group  `json:"integrity"`         // IntegrityKinds, every kind present
	Members     []MemberReport     `json:"members,omitempty"` // only when asked for
	Spooled     int                `json:"spooled"`           // events merged from the local spool
	Torn        int                `json:"torn_lines"`        // lines of the record that did not parse
}

// MountReport is one mount of the run (runrecord.Mount): for a mount still
// running, how often it flushes, and, when it serves on this host and
// answered, what it said (Live).
type MountReport struct {
	runrecord.Mount
	// Every is the mount's flush interval (a Go duration), "" when its
	// record does not say: the record has its reads as of LastFlush, and
	// its counters only once it writes run_end.
	Every string `json:"flush_interval,omitempty"`
	Live  *Live  `json:"live,omitempty"`
}

// Live is what a running mount on this host answered (see LiveMount).
type Live struct {
	Mountpoint string           `json:"mountpoint"`
	Time       time.Time        `json:"time"`            // when it answered
	Totals     runrecord.Totals `json:"totals"`          // its counters then
	Error      string           `json:"error,omitempty"` // its consumed set could not be read (its counters count)
}

// ConsumedReport summarises the run's consumed set.
type ConsumedReport struct {
	consumed.Summary        // members_opened, members_full, bytes, splits
	Digest           string `json:"digest"` // ConsumedDigest
}

// EventReport is one integrity event of the run.
type EventReport struct {
	Time      time.Time        `json:"time"`
	Event     string           `json:"event"`
	Path      string           `json:"path"`
	MemberID  string           `json:"member_id,omitempty"`
	Source    string           `json:"source,omitempty"`
	VersionID string           `json:"version_id,omitempty"`
	Expected  string           `json:"expected,omitempty"`
	Range     *runrecord.Range `json:"range,omitempty"`
	From      string           `json:"from,omitempty"`
	Error     string           `json:"error,omitempty"`
	Host      string           `json:"host,omitempty"`
	PID       int              `json:"pid,omitempty"`
}

// Group is the integrity events of one kind: how many, and the distinct
// member paths they name, sorted.
type Group struct {
	Count   int64    `json:"count"`
	Members []string `json:"members"`
}

// MemberReport is one consumed member (`pinfs run show --members`).
type MemberReport struct {
	Index   int    `json:"index"`
	Path    string `json:"path"`
	ID      string `json:"id"`
	Digest  string `json:"digest"`  // blake3:<hex>
	Version string `json:"version"` // see Version
	Source  string `json:"source"`  // s3://bucket/key or cas:blake3:<hex>
	Size    int64  `json:"size"`
	Bytes   int64  `json:"bytes"` // distinct bytes read
	Full    bool   `json:"full"`  // Bytes == Size, as consumed.Set.Summarize counts it
	Split   string `json:"split,omitempty"`
	// Passthrough: the kernel served it through FUSE passthrough at
	// least once (see PassthroughReport).
	Passthrough bool `json:"passthrough,omitempty"`
}

// IntegrityKinds are the event kinds Report.Integrity groups, in the
// order a report lists them.
var IntegrityKinds = []string{runrecord.Mismatch, runrecord.VersionMissing, runrecord.FetchFailed}

// Show returns the report of run, whose snapshot's member table is t: its
// state and mounts as of now (alive tells which processes still run; see
// runrecord.Run.Mounts), the totals of the mounts that ended, its integrity
// events listed and grouped by kind, and its consumed set summarised, with
// every consumed member in index order when members is true. It fails only
// when the consumed set cannot be read (see Consumed).
func Show(run *runrecord.Run, t *verify.Table, now time.Time, alive runrecord.Liveness, members bool) (*Report, error) {
	s, err := Consumed(run, t)
	if err != nil {
		return nil, err
	}
	return ShowSet(run, t, s, now, alive, members, nil), nil
}

// ShowSet is Show for a caller that has the run's consumed set s already
// (Consumed of the same run and table), as pinfs run export does, and
// that asked the run's live mounts on this host (AskLive; nil for none).
// A live mount is the running mount of this host with its pid: its
// counters are added to the totals, which otherwise hold only run_end's,
// and its consumed set so far to s (in place), so that the report is
// current rather than as of each mount's last flush. A live mount that
// matches no running mount of the record is left out.
func ShowSet(run *runrecord.Run, t *verify.Table, s *consumed.Set, now time.Time, alive runrecord.Liveness, members bool, live []LiveMount) *Report {
	ms := run.Mounts(now, alive)
	host, _ := os.Hostname()
	r := &Report{
		RunID:     run.RunID,
		Digest:    run.Digest,
		State:     runStateOf(run, ms),
		Permit:    run.Permit,
		Mounts:    make([]MountReport, len(ms)),
		Events:    []EventReport{},
		Integrity: map[string]*Group{},
		Spooled:   run.Spooled,
		Torn:      run.Torn,
	}
	for i, m := range ms {
		r.Mounts[i] = MountReport{Mount: m}
		if m.FlushInterval > 0 {
			r.Mounts[i].Every = m.FlushInterval.String()
		}
		if m.Totals != nil {
			addTotals(&r.Totals, m.Totals)
		}
	}
	for _, l := range live {
		m := liveMountOf(r.Mounts, host, l.PID)
		if m == nil {
			continue
		}
		m.Live = &Live{Mountpoint: l.Mountpoint, Time: l.Time, Totals: l.Totals}
		addTotals(&r.Totals, &l.Totals)
		if l.Set != nil {
			s.Union(l.Set)
		} else if l.Err != nil {
			m.Live.Error = l.Err.Error()
		}
	}
	r.Consumed = ConsumedReport{Summary: s.Summarize(t), Digest: ConsumedDigest(s, t)}
	var pt *roaring.Bitmap
	r.Passthrough, pt = passthroughReport(run, t)
	for _, k := range IntegrityKinds {
		r.Integrity[k] = &Group{Members: []string{}}
	}
	for i := range run.Events {
		e := &run.Events[i]
		g := r.Integrity[e.Event]
		if g == nil {
			continue
		}
		g.Count++
		g.Members = append(g.Members, e.Path)
		r.Events = append(r.Events, EventReport{
			Time: e.Time, Event: e.Event, Path: e.Path, MemberID: e.MemberID, Source: e.Source,
			VersionID: e.VersionID, Expected: e.Expected, Range: e.Range, From: e.From, Error: e.Error,
			Host: e.Host, PID: e.PID,
		})
	}
	for _, g := range r.Integrity {
		slices.Sort(g.Members)
		g.Members = slices.Compact(g.Members)
	}
	if members {
		r.Members = memberReports(s, t, pt)
	}
	return r
}

// liveMountOf returns the running mount of ms that process pid of host
// serves, the latest if several, and nil if none does or it has its live
// answer already.
func liveMountOf(ms []MountReport, host string, pid int) *MountReport {
	for i := len(ms) - 1; i >= 0; i-- {
		m := &ms[i]
		if m.Host == host && m.PID == pid && m.State == runrecord.StateRunning && m.Live == nil {
			return m
		}
	}
	return nil
}

// runStateOf is run.State over its mounts ms, without reading them again.
func runStateOf(run *runrecord.Run, ms []runrecord.Mount) string {
	return runrecord.StateOf(ms, run.Permit != nil)
}

// memberReports lists the members of s in index order, marking those of
// pt (nil for none) as served by passthrough.
func memberReports(s *consumed.Set, t *verify.Table, pt *roaring.Bitmap) []MemberReport {
	ms := make([]MemberReport, 0, s.Opened.GetCardinality())
	it := s.Opened.Iterator()
	for it.HasNext() {
		i := it.Next()
		m := t.Member(int(i))
		n := s.Bytes(i, m.Size)
		ms = append(ms, MemberReport{
			Index: int(i), Path: m.Path, ID: m.ID, Digest: m.Digest, Version: Version(&m), Source: m.Source(),
			Size: m.Size, Bytes: n, Full: n == m.Size, Split: m.Split, Passthrough: pt != nil && pt.Contains(i),
		})
	}
	return ms
}

// addTotals adds b to a, counter by counter.
func addTotals(a, b *runrecord.Totals) {
	a.MembersOpened += b.MembersOpened
	a.BytesServed += b.BytesServed
	a.BlocksVerified += b.BlocksVerified
	a.MemHits += b.MemHits
	a.DiskHits += b.DiskHits
	a.NetworkFetches += b.NetworkFetches
	a.Mismatches += b.Mismatches
	a.VersionMissing += b.VersionMissing
	a.FetchFailed += b.FetchFailed
	a.PassthroughOpens += b.PassthroughOpens
}
