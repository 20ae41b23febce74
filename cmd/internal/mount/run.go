package mount

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/pinfs/pinfs/cmd/internal/admission"
	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/metrics"
	"github.com/pinfs/pinfs/cmd/internal/mountstatus"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/cmd/internal/runs"
	"github.com/pinfs/pinfs/fs"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/store/health"
	"github.com/pinfs/pinfs/store/metacache"
	"github.com/pinfs/pinfs/store/pool"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

// Config is one mount.
type Config struct {
	Digest     verify.Digest
	Mountpoint string
	Store      store.Store
	CacheDir   string
	CacheMem   int64 // memory block cache budget in bytes
	CacheDisk  int64 // disk block cache budget in bytes
	RunRecord  string
	RunID      string // "" generates one
	AllowOther bool
	UID, GID   uint32
	Debug      bool
	Log        *slog.Logger
	Out        io.Writer // the run id is printed here

	// MetricsAddr, when set, serves Prometheus metrics at /metrics and
	// the Go profiler at /debug/pprof/ (keep it on loopback).
	MetricsAddr string

	// RequirePermit refuses the mount, before anything is mounted or
	// written to the run record, unless run RunID holds a permit for
	// exactly Digest that checks out against the store
	// (admission.CheckPermit, under Policy when set); the record is then
	// opened to hold exactly that permit (runrecord.Options.Permit).
	RequirePermit bool

	// Policy, when set, refuses the mount the same way unless Digest is
	// approved under it (admission.Approved).
	Policy *sign.Policy

	// FlushInterval is how often what was read since the last time is
	// written to the run record as a consumed delta (default a minute):
	// a crash loses at most that. It is always written at the end.
	FlushInterval time.Duration

	// ReadTimeout bounds the time a read may wait for the store (retries
	// and throttling included); StallTimeout cuts off a response that
	// delivers nothing for that long. Zero means blocks.Config's default.
	ReadTimeout, StallTimeout time.Duration

	// ReadaheadMax is the largest readahead window of a sequential reader
	// and ReadaheadBudget the memory all readahead of the mount may take
	// (blocks.Config; zero means its defaults, ReadaheadMax < 0 disables
	// readahead).
	ReadaheadMax, ReadaheadBudget int64

	// MemoryTarget is the memory the mount may use (--memory-target),
	// shared between its heap and its block pool, and the pool between
	// the memory tier, readahead and a reserve (store/memtarget). 0: from
	// the cgroup that limits the process when FromCgroup, else the sum of
	// CacheMem, ReadaheadBudget, blocks.PoolReserve and the heap's need.
	// CacheMemSet and ReadaheadBudgetSet say that CacheMem and
	// ReadaheadBudget were given explicitly: they then win over the
	// target's split for their part.
	MemoryTarget                    int64
	FromCgroup                      bool
	CacheMemSet, ReadaheadBudgetSet bool
	cgroupSelf, cgroupRoot          string // tests: memtarget.Request's Self and Root

	// Ready, when set, is called with the run id once the mount serves,
	// where Notify reports readiness to a waiting parent: pinfs derive
	// mounts its inputs in-process and waits for this before it runs the
	// transform.
	Ready func(runID string)

	// ProbeTimeout bounds the check of the store a mount makes before it
	// serves (checkStore; zero: 10 s).
	ProbeTimeout time.Duration

	// Passthrough lets the kernel serve an open of a member whose
	// verified whole-member file is in the disk tier from that file (FUSE
	// passthrough), once a probe after mounting shows that it takes
	// backing files (passthrough.go). False serves every read as before.
	Passthrough bool
}

// Run mounts c.Digest at c.Mountpoint and serves it until ctx ends
// (SIGTERM, SIGINT) or the mount is unmounted from outside. It reports
// readiness or failure to a waiting parent (Notify). With c.RequirePermit
// or c.Policy it checks the run's permit or the snapshot's approvals
// against the store first, before it touches the mountpoint, the cache
// or the run record. Before it writes the run record it checks that the
// store takes its credentials, even when the snapshot came from the cache
// dir (checkStore): a refusal fails the mount, an unreachable store does
// not.
func Run(ctx context.Context, c Config) (err error) {
	runID := ""
	defer func() { Notify(runID, err) }()
	if c.RunID == "" {
		c.RunID = runrecord.NewRunID()
	}
	// Every line this mount logs names its snapshot and run.
	log := c.Log.With("digest", string(c.Digest), "run_id", c.RunID)
	c.Log = log
	defer func() {
		// The caller prints err as one line; the log keeps what that line
		// leaves out (the SDK's detail), when there is any.
		if err != nil && store.Detail(err) != err.Error() {
			log.Error("mount failed", "err", store.Detail(err))
		}
	}()
	// Every read of a tier, its metadata included, is bounded by the
	// stall and read timeouts (store/httpstore), so that a tier that
	// stalls fails the read, or sends it to the fallback store.
	if t, ok := c.Store.(interface {
		SetTimeouts(stall, read time.Duration)
	}); ok {
		t.SetTimeouts(c.StallTimeout, c.ReadTimeout)
	}
	permit, err := c.admitted(ctx)
	if err != nil {
		return err
	}
	if cleaned, err := CleanStale(c.Mountpoint); err != nil {
		return err
	} else if cleaned {
		log.Info("removed a dead mount left by an earlier pinfs", "mountpoint", c.Mountpoint)
	}
	// The fetches of the read path go through watched, whose last failure
	// pinfs status reports.
	watched := health.New(c.Store)
	meta := metacache.New(filepath.Join(c.CacheDir, "meta"), watched, metacache.WithLogger(log))
	snap, err := verify.Load(ctx, meta, c.Digest)
	if err != nil {
		return err
	}
	if err := checkStore(ctx, watched, c.Digest, c.ProbeTimeout, log); err != nil {
		return err
	}
	tracker := consumed.NewTracker(snap.Table()) // before heapNeed, which counts what is loaded
	index, heap := heapNeed(snap.Table().Len(), c.CacheMem)
	sizes, err := planMemory(&c, heap)
	if err != nil {
		return err
	}
	sizes.Log(log, "snapshot_heap", index)
	rec, err := runrecord.Open(ctx, runrecord.Options{
		URL: c.RunRecord, RunID: c.RunID, Digest: c.Digest, SpoolDir: spoolDir(c.CacheDir),
		RequirePermit: c.RequirePermit, Permit: permit, Store: c.Store.String(), FlushInterval: c.flushInterval(),
	})
	if err != nil {
		return err
	}
	runID = rec.RunID()
	defer func() {
		if cerr := rec.Close(context.WithoutCancel(ctx)); cerr != nil {
			log.Warn("run record", "err", cerr)
		}
	}()
	disk, err := cache.OpenDisk(filepath.Join(c.CacheDir, "blocks"), c.CacheDisk, cache.WithLogger(log))
	if err != nil {
		return err
	}
	defer disk.Close()
	bp, err := pool.New(sizes.Pool)
	if err != nil {
		return err
	}
	defer closePool(bp, log) // after the Reader's Close below, which waits for its holders
	br, err := blocks.New(blocks.Config{
		Objects: watched, Content: watched.Content(), Fallback: fallbackOf(c.Store), Outboards: meta, MemBytes: sizes.Mem, Disk: disk,
		Reporter: reporter{rec: rec, log: log}, ReadTimeout: c.ReadTimeout, StallTimeout: c.StallTimeout,
		ReadaheadMax: c.ReadaheadMax, ReadaheadBudget: sizes.Readahead, Pool: bp,
		LocalCAS: localCAS(c.Store),
	})
	if err != nil {
		return err
	}
	if rec.Resumed() {
		seed(ctx, c, rec, snap.Table(), tracker)
	}
	limitMemory(sizes, log)
	pt, ptTree, ptReason := passthroughOf(&c)
	mx := metrics.New(br, "digest", string(c.Digest), "run_id", runID)
	mx.WatchMetaCache(meta)
	mx.WatchPassthrough(pt)
	mx.WatchPool(br.Pool())
	mx.SetLogger(log)
	if c.MetricsAddr != "" {
		addr, err := mx.Serve(ctx, c.MetricsAddr)
		if err != nil {
			br.Close()
			return fmt.Errorf("metrics: %w", err)
		}
		log.Info("metrics", "url", "http://"+addr.String()+"/metrics")
		if !metrics.Loopback(addr) {
			log.Warn("metrics and pprof are served on an address other hosts can reach: "+
				"/debug/pprof/ shows this process's memory and command line to anyone who connects; "+
				"use a loopback address (127.0.0.1:PORT)", "addr", addr.String())
		}
	}
	status := &mountstatus.Source{ // pinfs status MOUNTPOINT reads it from the root's xattr
		Mountpoint: c.Mountpoint, Digest: string(c.Digest), RunID: runID, Store: c.Store.String(), CacheDir: c.CacheDir,
		Members: snap.Table().Len(), Started: time.Now(), Stats: br.Stats, MembersOpened: tracker.MembersOpened,
		StoreError: storeError(watched), Passthrough: passthroughStatus(pt), Pool: mountstatus.PoolOf(br.Pool()),
	}
	// pinfs run show asks for the consumed set so far, in its own attributes.
	live := &mountstatus.Consumed{Encode: func() string { return tracker.Set().Encode() }}
	root := fs.NewRoot(snap, &files{digest: c.Digest, blocks: br, members: snap.Table(), tracker: tracker, metrics: mx, log: log},
		fs.Options{UID: c.UID, GID: c.GID, Mtime: time.Unix(0, 0), Logger: log, Status: status.JSON, Consumed: live.Attr,
			Passthrough: ptTree})
	server, err := fs.Mount(c.Mountpoint, root, fs.MountOptions{AllowOther: c.AllowOther, Debug: c.Debug, Name: string(c.Digest)})
	if err != nil {
		br.Close()
		return fmt.Errorf("mount %s: %w", c.Mountpoint, err)
	}
	probePassthrough(server, pt, disk.Dir(), ptReason, log)
	fmt.Fprintf(c.Out, "run %s serving %s at %s\n", runID, c.Digest, c.Mountpoint)
	log.Info("serving", "mountpoint", c.Mountpoint,
		"members", snap.Table().Len(), "resumed", rec.Resumed())
	Notify(runID, nil)
	if c.Ready != nil {
		c.Ready(runID)
	}

	serve(ctx, c, server, func() { emitConsumed(ctx, rec, tracker, log) })

	// Reads may still be running on a lazily detached mount: Close refuses
	// new ones, ends the fetches and waits (bounded) for them to return.
	if err := br.Close(); err != nil {
		log.Warn("closing the block reader", "err", err)
	}
	end := context.WithoutCancel(ctx)
	emitConsumed(end, rec, tracker, log)
	tot := totals(br.Stats(), tracker.MembersOpened())
	tot.PassthroughOpens = pt.Status().Opens
	return rec.Emit(end, runrecord.Event{Event: runrecord.RunEnd, Totals: tot})
}

// spoolDir is where a mount with cache directory cacheDir spools run
// record events and keeps its bindings.
func spoolDir(cacheDir string) string { return runrecord.SpoolDirOf(cacheDir) }

// admitted makes the checks of c.RequirePermit and c.Policy, which come
// before anything is mounted or written. With RequirePermit it returns
// the run's permit once it checked out against the store
// (admission.CheckPermit, which checks the approvals under Policy too),
// for the run record to be opened with; else, with Policy, it checks
// Digest's approvals and returns nil.
func (c *Config) admitted(ctx context.Context) (*runrecord.Permit, error) {
	switch {
	case c.RequirePermit:
		o := runrecord.Options{URL: c.RunRecord, RunID: c.RunID, SpoolDir: spoolDir(c.CacheDir)}
		v, err := admission.CheckPermit(ctx, c.Store, o, c.Digest, c.Policy)
		if err != nil {
			return nil, err
		}
		p := v.Permit()
		return &p, nil
	case c.Policy != nil:
		if _, err := admission.Approved(ctx, c.Store, c.Digest, c.Policy); err != nil {
			return nil, fmt.Errorf("%s: %w", c.Digest, err)
		}
	}
	return nil, nil
}

// totals returns the run_end totals of a run whose block reader counted st
// and which opened members distinct members.
func totals(st blocks.Stats, members int64) *runrecord.Totals {
	return &runrecord.Totals{
		MembersOpened: members, BytesServed: st.BytesServed, BlocksVerified: st.BlocksVerified,
		MemHits: st.MemHits, DiskHits: st.DiskHits, NetworkFetches: st.NetworkFetches, Mismatches: st.Mismatches,
		VersionMissing: st.VersionMissing, FetchFailed: st.FetchFailed,
	}
}

// serve waits until the mount goes away or ctx ends, calling tick
// periodically. When ctx ends it unmounts, lazily if files are open.
func serve(ctx context.Context, c Config, server *fuse.Server, tick func()) {
	done := make(chan struct{})
	go func() { server.Wait(); close(done) }()
	ticker := time.NewTicker(c.flushInterval())
	defer ticker.Stop()
	for {
		select {
		case <-done:
			c.Log.Info("unmounted", "mountpoint", c.Mountpoint)
			return
		case <-ticker.C:
			tick()
		case <-ctx.Done():
			c.Log.Info("signalled: unmounting", "mountpoint", c.Mountpoint)
			if err := server.Unmount(); err != nil {
				c.Log.Info("mount busy: detaching it lazily", "err", err)
				if err := Unmount(c.Mountpoint, true); err != nil { // fusermount -u -z when not root
					c.Log.Warn("lazy unmount", "err", err)
				}
			}
			select { // a detached mount with open files may not finish: bounded
			case <-done:
			case <-time.After(5 * time.Second):
			}
			return
		}
	}
}

// flushInterval is c.FlushInterval or its default, a minute.
func (c *Config) flushInterval() time.Duration {
	if c.FlushInterval > 0 {
		return c.FlushInterval
	}
	return time.Minute
}

// emitConsumed writes what t recorded since the last call as a consumed
// delta, with the members served by passthrough since the last call. A
// delta that could not be written goes back into t, for the next.
// An empty one is written too: it says the mount is alive (pinfs run list
// tells a crashed mount on another host by its silence).
func emitConsumed(ctx context.Context, rec *runrecord.Record, t *consumed.Tracker, log *slog.Logger) {
	d, pt := t.Delta(), t.PassthroughDelta()
	e := runrecord.Event{Event: runrecord.ConsumedSet, Set: d.Encode(), Passthrough: consumed.EncodeMembers(pt)}
	if err := rec.Emit(ctx, e); err != nil {
		t.Requeue(d)
		t.RequeuePassthrough(pt)
		log.Warn("run record: consumed set", "err", err)
	}
}

// seed starts a resumed mount's tracker from what the run consumed before,
// so that its deltas hold only what is new and run show is right at once.
// Failing to read it costs only bigger deltas: the run's consumed set is
// the union of its deltas, so nothing is lost, and the mount goes on.
func seed(ctx context.Context, c Config, rec *runrecord.Record, t *verify.Table, tr *consumed.Tracker) {
	src := runrecord.Source{URL: c.RunRecord, SpoolDir: spoolDir(c.CacheDir)}
	evs, err := runrecord.ReadConsumed(ctx, src, rec.RunID())
	var set *consumed.Set
	if err == nil {
		set, err = runs.Consumed(&runrecord.Run{RunID: rec.RunID(), Digest: c.Digest, Events: evs}, t)
	}
	if err == nil {
		err = tr.Seed(set)
	}
	if err != nil {
		c.Log.Warn("resume: not seeded with what the run consumed before (its later deltas repeat it)", "err", err)
		return
	}
	c.Log.Info("resume: seeded with what the run consumed before", "members", set.Opened.GetCardinality(), "events", len(evs))
}

// reporter writes read-path events to the run record; Report returns
// once the event is durable (in the record or its spool), or an error, at
// which the read that caused the event fails.
type reporter struct {
	rec *runrecord.Record
	log *slog.Logger
}

func (r reporter) Report(ctx context.Context, ev blocks.Event) error {
	m := ev.Member
	e := runrecord.Event{
		Event: ev.Kind, Path: m.Path, MemberID: m.ID, Expected: m.Digest.String(),
		Range: &runrecord.Range{Off: ev.Off, Len: ev.Len}, From: ev.From,
	}
	if o := m.Object; o.CAS != "" {
		e.Source = "cas:" + o.CAS
	} else {
		e.Source, e.VersionID = "s3://"+o.Bucket+"/"+o.Key, o.VersionID
	}
	if ev.Err != nil {
		e.Error = ev.Err.Error()
	}
	r.log.Error("read path", "event", ev.Kind, "path", m.Path, "from", ev.From, "off", ev.Off, "err", store.Detail(ev.Err))
	if err := r.rec.Emit(context.WithoutCancel(ctx), e); err != nil {
		r.log.Error("run record: event not recorded, failing the read", "event", ev.Kind, "path", m.Path, "err", err)
		return err
	}
	return nil
}

// fallbackOf returns the reader of the fallback store of st, a tier with
// one (store/fallback), or nil: the block reader reads a block from it
// when the tier's copies fail verification twice.
func fallbackOf(st store.Store) store.ContentReader {
	if f, ok := st.(interface{ Fallback() store.ContentReader }); ok {
		return f.Fallback()
	}
	return nil
}

// localCAS reports whether st keeps content-addressed members in files on
// this machine (a local store): they are not copied into the disk cache as
// they are read (blocks.Config's LocalCAS); passthrough then serves only
// those pinfs warm put there.
func localCAS(st store.Store) bool {
	l, ok := st.(interface{ LocalCAS() bool })
	return ok && l.LocalCAS()
}
