package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/progress"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/cmd/internal/runs"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

var runCmd = &command{
	name:  "run",
	short: "what a run read, whether anything was wrong, and replaying it",
	long: `Answer the provenance questions from a run record: which runs there are
(list), what one run read and what went wrong while it read (show),
whether its input can be read again byte for byte (replay), and its
provenance for audit pipelines (export: W3C PROV-JSON or an in-toto
Statement). Every command reads the record while runs are still going,
skips a torn last line and merges events still in this host's spool.`,
	subs: []*command{runListCmd, runShowCmd, runReplayCmd, runExportCmd},
}

// recordFlags are the flags every pinfs run command takes.
type recordFlags struct {
	record, cacheDir *string
	meta             metaFlags // over cacheDir
}

func defineRecordFlags(fs *pflag.FlagSet) recordFlags {
	f := recordFlags{
		record:   fs.String("run-record", "", recordHelp),
		cacheDir: fs.String("cache-dir", defaultCacheDir(), "`DIR` whose spool (undelivered events) is merged and whose verified metadata (DIR/meta) is reused and kept"),
	}
	f.meta = metaFlags{fs: fs, dir: f.cacheDir}
	return f
}

// source returns the record to read.
func (f recordFlags) source() (runrecord.Source, error) {
	url, err := recordURL(*f.record, *f.cacheDir)
	if err != nil {
		return runrecord.Source{}, err
	}
	return runrecord.Source{URL: url, SpoolDir: spoolOf(*f.cacheDir)}, nil
}

// readRun reads run id's events; a missing run is exit 1 with one line.
func (f recordFlags) readRun(ctx context.Context, args []string) (*runrecord.Run, error) {
	if len(args) != 1 {
		return nil, usagef("want exactly one RUN_ID, got %d arguments", len(args))
	}
	src, err := f.source()
	if err != nil {
		return nil, err
	}
	return runrecord.ReadRun(ctx, src, args[0])
}

// storeFlagOfRun is the --store flag of pinfs run show, replay and
// export, which default to the store the run's mounts recorded.
func storeFlagOfRun(fs *pflag.FlagSet) *string {
	return fs.String("store", os.Getenv("PINFS_STORE"), "`STORE` that holds the snapshot (default: $PINFS_STORE, else the store the run's mount recorded)")
}

// runStore opens the store of run: storeURL, or else the store its latest
// mount recorded (run_start and resume name the mount's --store).
func runStore(ctx context.Context, run *runrecord.Run, storeURL string) (store.Store, error) {
	if storeURL == "" {
		for _, m := range run.Mounts(time.Now(), nil) {
			if m.Store != "" {
				storeURL = m.Store
			}
		}
	}
	if storeURL == "" {
		return nil, usagef("run %s recorded no store: pass --store", run.RunID)
	}
	return openStore(ctx, storeURL)
}

// table loads the member table of run's snapshot from its store
// (runStore) through the cache dir's verified metadata (metaFlags), as
// the run's mount did, and returns the table and the store. A local store
// goes through it too: what makes a reload cheap is the cache's index of
// the table, not the nearness of its bytes.
func (f recordFlags) table(ctx context.Context, run *runrecord.Run, storeURL string) (*verify.Table, store.Store, error) {
	st, err := runStore(ctx, run, storeURL)
	if err != nil {
		return nil, nil, err
	}
	g, err := f.meta.reader(ctx, st)
	if err != nil {
		return nil, nil, err
	}
	snap, err := verify.Load(ctx, g, run.Digest)
	if err != nil {
		return nil, nil, fmt.Errorf("the member table of %s: %w", run.Digest, err)
	}
	return snap.Table(), st, nil
}

var runListCmd = &command{
	name:  "list",
	args:  "[--run-record URL] [--json]",
	short: "one line per run: id, digest, first and last time, state, integrity events",
	long: `List every run in the run record: run id, snapshot digest, first and last
event time, state and the counts of integrity events (mismatch,
version_missing, fetch_failed). State is running, ended, crashed (no
run_end and no live process: on this host the pid is gone; on another
host nothing was written for three flush intervals) or admitted (a
permit, never mounted).`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		rf := defineRecordFlags(fs)
		asJSON := fs.Bool("json", false, "print the runs as a JSON list")
		return func(ctx context.Context, args []string) error {
			if len(args) != 0 {
				return usagef("want no arguments, got %d", len(args))
			}
			src, err := rf.source()
			if err != nil {
				return err
			}
			infos, err := runrecord.List(ctx, src, time.Now(), runrecord.LocalLiveness)
			if err != nil {
				return err
			}
			if *asJSON {
				if infos == nil {
					infos = []runrecord.RunInfo{}
				}
				return printJSON(out, infos)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tDIGEST\tFIRST\tLAST\tSTATE\tMOUNTS\tMISMATCH\tVERSION_MISSING\tFETCH_FAILED")
			for _, r := range infos {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", r.RunID, r.Digest, stamp(r.First), stamp(r.Last), r.State, r.Mounts,
					r.Integrity[runrecord.Mismatch], r.Integrity[runrecord.VersionMissing], r.Integrity[runrecord.FetchFailed])
			}
			return tw.Flush()
		}
	},
}

// stamp formats t for a table: UTC to the second.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05Z")
}

var runShowCmd = &command{
	name:  "show",
	args:  "RUN_ID [--run-record URL] [--store STORE] [--members] [--json] [--live-timeout D]",
	short: "what one run read and what went wrong while it read",
	long: `Show run RUN_ID: its snapshot digest and permit, every mount (host, pid,
start, resume, end, the pinfs build that served it), the totals of its
run_end events, its integrity events grouped by kind with the members
they name, and its consumed set: members opened and read in full,
distinct bytes, per split, and the consumed set's digest. --members
lists each consumed member: path, id, digest, pinned version, bytes
read, full.

A running mount writes its consumed set every --flush-interval and its
counters at run_end, so the record has it only as of its last flush,
which show says. Show asks the run's mounts that serve on this host (the
mount table's pinfs mounts of its digest, matched by run id and pid, and
mounted by the user of that pid) for their counters and consumed set so
far, each within --live-timeout, so that a live run is reported as it is
now. Replay and export use the record only.

The consumed set is kept by member index, so show reads the snapshot's
member table: from --store, or from the store the run's mount recorded.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		rf := defineRecordFlags(fs)
		storeURL := storeFlagOfRun(fs)
		members := fs.Bool("members", false, "list the consumed members")
		asJSON := fs.Bool("json", false, "print the run as JSON")
		liveTimeout := fs.Duration("live-timeout", 5*time.Second, "wait at most `D` for each running mount of the run on this host to answer with its counters and consumed set; 0 asks none and reports the record only")
		return func(ctx context.Context, args []string) error {
			if *liveTimeout < 0 {
				return usagef("--live-timeout %v: want 0 or a positive duration", *liveTimeout)
			}
			rep, _, _, err := rf.report(ctx, args, *storeURL, *members, *liveTimeout)
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(out, rep)
			}
			printRun(out, rep)
			return nil
		}
	},
}

// report reads run args[0] and its snapshot's member table and builds
// its report; with liveTimeout > 0 it asks the run's mounts on this host
// for their counters and consumed set so far (runs.AskLive), each within
// liveTimeout.
func (f recordFlags) report(ctx context.Context, args []string, storeURL string, members bool, liveTimeout time.Duration) (*runs.Report, *consumed.Set, *verify.Table, error) {
	run, err := f.readRun(ctx, args)
	if err != nil {
		return nil, nil, nil, err
	}
	t, _, err := f.table(ctx, run, storeURL)
	if err != nil {
		return nil, nil, nil, err
	}
	set, err := runs.Consumed(run, t)
	if err != nil {
		return nil, nil, nil, err
	}
	var live []runs.LiveMount
	if liveTimeout > 0 {
		live = runs.AskLive(ctx, run, t, liveTimeout)
	}
	return runs.ShowSet(run, t, set, time.Now(), runrecord.LocalLiveness, members, live), set, t, nil
}

func printRun(w io.Writer, r *runs.Report) {
	fmt.Fprintf(w, "run %s  %s  %s\n", r.RunID, r.Digest, r.State)
	if p := r.Permit; p != nil {
		fmt.Fprintf(w, "permit  purpose %q gate %s generation %d approvals %s (%s)\n",
			p.Purpose, orNone(p.Gate), p.Generation, orNone(strings.Join(p.Approvals, ",")), stamp(p.Time))
	}
	fmt.Fprintln(w, "mounts")
	for _, m := range r.Mounts {
		kind, end := "start ", "-"
		if m.Resumed {
			kind = "resume"
		}
		if m.End != nil {
			end = stamp(*m.End)
		}
		build := ""
		if m.Pinfs != nil {
			build = "  pinfs " + m.Pinfs.String()
		}
		fmt.Fprintf(w, "  %s pid %d  %s %s  end %s  %s%s\n", m.Host, m.PID, kind, stamp(m.Start), end, m.State, build)
		if m.State == runrecord.StateRunning {
			printCurrency(w, &m)
		}
	}
	t := r.Totals
	fmt.Fprintf(w, "totals  bytes served %d, blocks verified %d, memory hits %d, disk hits %d, network fetches %d\n",
		t.BytesServed, t.BlocksVerified, t.MemHits, t.DiskHits, t.NetworkFetches)
	if n := unasked(r.Mounts); n > 0 {
		fmt.Fprintf(w, "  without the counters of %d running mount(s) not asked live: a mount records them at run_end\n", n)
	}
	c := r.Consumed
	fmt.Fprintf(w, "consumed  %d members opened, %d read in full, %d bytes  (%s)\n", c.MembersOpened, c.MembersFull, c.Bytes, c.Digest)
	for _, name := range slices.Sorted(maps.Keys(c.Splits)) {
		s := c.Splits[name]
		fmt.Fprintf(w, "  split %-10s %d opened, %d full, %d bytes\n", name, s.MembersOpened, s.MembersFull, s.Bytes)
	}
	if p := r.Passthrough; p != nil && p.Error != "" {
		fmt.Fprintf(w, "passthrough  unreadable: %s\n", p.Error)
	} else if p != nil {
		fmt.Fprintf(w, "passthrough  %d members served by the kernel from the disk cache (%d opens), counted as read in full\n",
			p.Members, r.Totals.PassthroughOpens)
	}
	if len(r.Events) == 0 {
		fmt.Fprintln(w, "integrity  no events")
	}
	for _, kind := range slices.Sorted(maps.Keys(r.Integrity)) {
		g := r.Integrity[kind]
		if g.Count == 0 {
			continue
		}
		fmt.Fprintf(w, "integrity  %s: %d (%s)\n", kind, g.Count, strings.Join(g.Members, ", "))
	}
	for _, e := range r.Events {
		fmt.Fprintf(w, "  %s %s %s %s\n", stamp(e.Time), e.Event, e.Path, e.Error)
	}
	if len(r.Members) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PATH\tID\tDIGEST\tVERSION\tBYTES\tFULL")
		for _, m := range r.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%t\n", m.Path, m.ID, m.Digest, m.Version, m.Bytes, m.Full)
		}
		tw.Flush()
	}
	if r.Spooled > 0 {
		fmt.Fprintf(w, "%d events merged from this host's spool (not yet in the record)\n", r.Spooled)
	}
	if r.Torn > 0 {
		fmt.Fprintf(w, "%d torn lines skipped\n", r.Torn)
	}
}

// printCurrency says how current the report is for running mount m: the
// record holds its reads as of its last flush; a live mount of this host
// answered for now.
func printCurrency(w io.Writer, m *runs.MountReport) {
	every := "flush interval not recorded"
	if d, err := time.ParseDuration(m.Every); err == nil {
		every = "every " + shortDuration(d)
	}
	flushed := "as of the last flush at " + stamp(m.LastFlush)
	if m.LastFlush.IsZero() {
		flushed = "as of its start at " + stamp(m.Start) + ", before any flush"
	}
	if l := m.Live; l != nil {
		fmt.Fprintf(w, "    live at %s, asked at %s: %d members opened, %d bytes served (the record is %s (%s))\n",
			l.Mountpoint, stamp(l.Time), l.Totals.MembersOpened, l.Totals.BytesServed, flushed, every)
		if l.Error != "" {
			fmt.Fprintf(w, "    its consumed set is the record's: %s\n", l.Error)
		}
		return
	}
	fmt.Fprintf(w, "    %s (%s)\n", flushed, every)
}

// shortDuration is d as time.Duration.String writes it, without the zero
// units at its end: 1m, 1h30m, 45s, 1m30s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// unasked counts the running mounts in ms that did not answer live.
func unasked(ms []runs.MountReport) int {
	n := 0
	for _, m := range ms {
		if m.State == runrecord.StateRunning && m.Live == nil {
			n++
		}
	}
	return n
}

var runReplayCmd = &command{
	name:  "replay",
	args:  "RUN_ID [--run-record URL] [--store STORE] [--all]",
	short: "re-read and verify every member the run consumed",
	long: `Re-read from the store every member run RUN_ID consumed (opened or read),
or every member of its snapshot with --all, at its pinned version, and
verify each whole member against its BLAKE3 digest. Progress goes to
stderr. Exit 0 proves the run's input can be reproduced byte for byte;
exit 1 names each member that cannot (its version is gone, it no longer
hashes to its digest, it cannot be read). The store is --store, or else,
as for pinfs run show, the store the run's mount recorded.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		rf := defineRecordFlags(fs)
		storeURL := storeFlagOfRun(fs)
		all := fs.Bool("all", false, "replay every member of the snapshot, not only those consumed")
		jobs := fs.Int("jobs", 16, "`N` members read at once")
		quiet := fs.Bool("quiet", false, "no progress on stderr")
		return func(ctx context.Context, args []string) error {
			run, err := rf.readRun(ctx, args)
			if err != nil {
				return err
			}
			t, st, err := rf.table(ctx, run, *storeURL)
			if err != nil {
				return err
			}
			members, err := replayed(run, t, *all)
			if err != nil {
				return err
			}
			var total int64
			for _, i := range members {
				total += t.Size(i)
			}
			bar := progress.New(os.Stderr, "replay", len(members), total, *quiet)
			problems, err := runs.Replay(ctx, st, t, members, *jobs, bar.Update)
			bar.Done()
			if err != nil {
				return err
			}
			for _, p := range problems {
				fmt.Fprintf(out, "FAIL %s %s (id %s): %s\n", p.Kind, p.Path, p.ID, p.Detail)
			}
			if len(problems) > 0 {
				fmt.Fprintf(out, "run %s: %d of %d members cannot be reproduced\n", run.RunID, len(problems), len(members))
				return errCheckFailed
			}
			fmt.Fprintf(out, "run %s: %d members, %d bytes reproduced byte for byte\n", run.RunID, len(members), total)
			return nil
		}
	},
}

// replayed returns the members to replay: all of t, or those run consumed.
func replayed(run *runrecord.Run, t *verify.Table, all bool) ([]int, error) {
	if all {
		ms := make([]int, t.Len())
		for i := range ms {
			ms[i] = i
		}
		return ms, nil
	}
	set, err := runs.Consumed(run, t)
	if err != nil {
		return nil, err
	}
	var ms []int
	for it := set.Opened.Iterator(); it.HasNext(); {
		ms = append(ms, int(it.Next()))
	}
	return ms, nil
}

var runExportCmd = &command{
	name:  "export",
	args:  "RUN_ID [--format prov|intoto] [--run-record URL] [--store STORE] [--out FILE]",
	short: "the run's provenance: W3C PROV-JSON or an in-toto Statement",
	long: `Write run RUN_ID's provenance. --format prov writes W3C PROV-JSON: the
snapshot and the members used are entities, the run is the activity,
its hosts and its permit are agents. --format intoto writes an in-toto
Statement (SLSA provenance v1 predicate) whose subject is the run and
whose materials (resolvedDependencies) are the manifest digest and the
consumed set's digest.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		rf := defineRecordFlags(fs)
		storeURL := storeFlagOfRun(fs)
		format := fs.String("format", "prov", "`FORMAT`: prov (W3C PROV-JSON) or intoto (in-toto Statement v1)")
		outFile := fs.String("out", "", "write to `FILE` instead of stdout")
		return func(ctx context.Context, args []string) error {
			if *format != "prov" && *format != "intoto" {
				return usagef("--format %q: want prov or intoto", *format)
			}
			rep, set, t, err := rf.report(ctx, args, *storeURL, true, 0) // the record's facts only: no live mount
			if err != nil {
				return err
			}
			var doc []byte
			if *format == "prov" {
				doc, err = runs.ExportPROV(rep, t, set)
			} else {
				doc, err = runs.ExportInToto(rep, set, t)
			}
			if err != nil {
				return err
			}
			if *outFile == "" {
				_, err = out.Write(doc)
				return err
			}
			return writeNew(*outFile, doc)
		}
	},
}

// writeNew writes data to a new file p, refusing to replace one.
func writeNew(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s exists: pinfs run export does not overwrite", p)
		}
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
