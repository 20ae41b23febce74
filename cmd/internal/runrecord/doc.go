// Package runrecord keeps the run record of a mount: which snapshot digest a
// training run is bound to, the integrity events seen while serving it, and
// the set of members it consumed. It answers "exactly which data did this
// run see?" after the fact.
//
// A record lives at a URL: a local JSON Lines file, or s3://bucket/prefix
// reached through a store.Blobs. Open binds a run id to a digest or resumes
// it; Emit appends one Event; Close stops background delivery.
//
// # Binding
//
// A run is bound to the digest of its first mount. Opening the same run id
// with the same digest resumes it (a resume event is appended); with another
// digest Open fails with ErrDigestChanged and writes nothing: the data
// changed, so it is a new run (resume keeps the original digest). In a local
// file the binding is the digest of the run's earlier events; in a store it
// is the object runs/<run-id>/run.json, made with an exclusive create
// (store.Creator), so that of two first mounts exactly one starts the run.
// A store that cannot create it exclusively is refused (an error wrapping
// store.ErrNotExclusive): the binding is exclusive or not made.
//
// # Permits
//
// Admit binds a run before any mount: it writes the run's Permit (digest,
// purpose, gate and generation, fences, policy, approvals) as the binding,
// a "permit" event as the run's first line in a local file, or the
// binding object run.json with a "permit" field in a store. The run is
// then bound to the permit's digest like any other, so a later alias
// generation never changes it. A second Admit returns the permit held and
// writes nothing; a run a mount started without a permit cannot be
// admitted. The first Open of an admitted run appends run_start (in a
// store it claims that by creating runs/<run-id>/start.json exclusively),
// later ones resume. With Options.RequirePermit, Open refuses, writing
// nothing, unless the run holds a permit for exactly the digest mounted
// (an error wrapping ErrNotPermitted), and, with Options.Permit, unless
// it holds exactly that permit; Record.Permit returns the permit.
// The spool's local binding keeps the permit, so an admitted run that
// this host mounted before resumes offline with RequirePermit (Held reads
// it from there too); its first mount needs the store.
//
// A permit read from the record is only a claim: anyone who can append to
// the record can write one. This package checks only that the run holds a
// permit for the digest; whether it checks out against the store
// (approvals, the gate's history) is admission's to check
// (cmd/internal/admission.CheckPermit), and a mount passes the permit it
// checked as Options.Permit.
//
// # Durability
//
// Emit returns only when its event is durable: appended to the local file
// and fsynced, or stored by a completed Put, or, when the store cannot be
// reached, appended to the local spool and fsynced. Every event is synced,
// not only the integrity ones: events are few (one per integrity failure and
// one consumed set per period), so there is nothing worth batching, and one
// rule is easier to trust than a list.
//
// # Spool
//
// A store-backed record needs a spool directory. An event whose Put fails
// is appended to <spool>/<run-id>.jsonl, and later events follow it there
// while it is not empty, so that a failing read is not held up by a dead
// network once per event. A background goroutine retries with backoff;
// delivered lines are removed by rewriting the spool atomically, and Open
// delivers what an earlier process left. Every event has a fixed key,
// runs/<run-id>/events/<UTC time>-<seq>-<event>-<hash of the line>.json,
// and its object holds exactly its spool line, so a redelivery after a
// crash is a no-op Put, and nothing is ever overwritten.
//
// A run must not start unbound, so Open refuses when the store is
// unreachable, with one exception: a run that this host already bound
// against the store (recorded in <spool>/<run-id>.run.json) may resume
// offline. Its events are spooled, and the delivery checks the store's
// binding before it sends any of them.
//
// # Local files
//
// The record file, the spool, its lock and the local binding are opened
// with O_NOFOLLOW (and close-on-exec): a symbolic link planted at one of
// those paths makes Open fail instead of being followed, so no other file
// is read as a record or appended to. Directories the record creates are
// 0700.
//
// # Consumed set
//
// A consumed event carries a delta in its "set" field: the compact text
// of a consumed.Set, keyed by member index in the snapshot's member table
// (which the run's digest fixes), holding the members opened, read in
// full, and the 4 KiB granules read of those read in part, that changed
// since the mount's previous delta. A mount writes one every
// FlushInterval (recorded on its run_start or resume) and at unmount, so
// a crash loses at most one interval. No single event is the answer: the
// run's consumed set is the union of every delta of every mount, which a
// reader computes (ReadConsumed returns the consumed events). A mount
// that resumes the run seeds its set with that union first, so its own
// totals and deltas continue the run rather than restart it.
//
// A delta may also carry "passthrough": the members of it that the kernel
// served through FUSE passthrough (consumed.EncodeMembers), whose reads
// never reached the mount, so that they are in the set as read in full. A
// reader that does not know the field loses nothing of the set.
//
// Records written before issue 9 carry a cumulative "members" list (path,
// id, digest, size, bytes, full) instead; Event.Members still decodes it,
// and a reader unions those lists like deltas (consumed.FromLegacy).
//
// # Reading
//
// ReadRun returns every event of one run, ordered by time, host, pid and
// seq, with duplicates removed, the run's digest and permit; ReadConsumed
// only its consumed events; List one summary line per run. They read a
// local file in one pass, skipping (and counting) lines that do not parse,
// such as a torn last line; from a store they list runs/<run-id>/ (List:
// runs/) and GET the event objects they need. With Source.SpoolDir, the
// events that a mount on this host spooled and has not delivered yet are
// merged in. A run's mounts, and whether it is running, ended or crashed,
// come from its run_start, resume and run_end events and the host and pid
// every event names (Run.Mounts, Run.State).
//
// # Concurrency
//
// Emit may be called from many goroutines; a record writes its events one
// at a time, in the order of their time and seq. Lines of one record, and of
// several processes writing the same local file or spool, never interleave
// (a mutex within the process, flock between processes).
package runrecord
