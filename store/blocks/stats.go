package blocks

import (
	"sync/atomic"

	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/store/pool"
)

// Stats is a snapshot of a Reader's counters.
type Stats struct {
	BytesServed    int64 // bytes copied into callers' buffers
	BlocksVerified int64 // blocks that passed verification (from disk or network)
	MemHits        int64 // blocks served from the memory tier
	DiskHits       int64 // blocks served from the disk tier (verified)
	Joined         int64 // block reads served by a load another read or readahead started
	NetworkFetches int64 // blocks fetched from the store
	Requests       int64 // ranged reads sent to the store (first tries, resumptions, retries)
	Retries        int64 // requests and outboard loads repeated after a failure
	Mismatches     int64 // copies of block bytes that failed verification
	OutboardLoads  int64 // outboards read through Config.Outboards
	Readaheads     int64 // flights started by readahead
	// ReadaheadSkipped counts the times readahead stopped short for lack
	// of room in the budget (the blocks are asked for again at the next
	// read).
	ReadaheadSkipped int64
	// ReadaheadBudget is the most bytes readahead and Warm may have
	// requested and not yet read (Config.ReadaheadBudget), and
	// ReadaheadBytes the bytes they have now.
	ReadaheadBudget, ReadaheadBytes int64
	// ReadaheadWindowMax is the largest readahead window any reader has
	// reached, in bytes; ReadaheadResets counts the open windows a jump
	// closed.
	ReadaheadWindowMax, ReadaheadResets int64
	FreshFlights                        int64 // loads started again for a read that joined a failed one
	VersionMissing                      int64 // "version_missing" events
	FetchFailed                         int64 // "fetch_failed" events
	// EventsUnrecorded counts events the Reporter could not make durable
	// when they happened; each failed the reads waiting for its flight and
	// is owed to the next read of its block (a failed retry of an owed
	// event is not counted again).
	EventsUnrecorded int64

	// PassthroughHanded counts the member files Backing handed over,
	// PassthroughRefused those it found but refused before reading them
	// (the cache dir's or the file's kind, owner or mode; not a size or
	// a verification failure, which count as Mismatches).
	PassthroughHanded, PassthroughRefused int64
	// PassthroughVerified counts the member files verified in full
	// before a hand-over, and PassthroughBytesVerified their bytes;
	// PassthroughBytesRead counts the bytes read to verify them, which
	// include those of files that failed.
	PassthroughVerified, PassthroughBytesVerified, PassthroughBytesRead int64

	// RunsCut counts the runs cut short because the pool had no free
	// slot for all their blocks; Lost the loads whose block left every
	// holder before a waiter took it (loaded again).
	RunsCut, Lost int64
	// ReadaheadStreams is the number of streams holding room in the
	// readahead budget now (each gets a fair share of it).
	ReadaheadStreams int

	Mem  cache.MemStats
	Disk cache.DiskStats
	Pool pool.Stats
}

type counters struct {
	bytesServed, verified, memHits, diskHits, joined, fetches, requests, retries,
	mismatches, outboardLoads, readaheads, aheadSkipped, aheadResets, windowMax, freshFlights,
	versionMissing, fetchFailed, eventsUnrecorded,
	backHanded, backRefused, backVerified, backBytes, backRead, runsCut, lost atomic.Int64
}

// Stats returns the Reader's counters and those of its cache tiers. Each
// counter is read atomically; the snapshot as a whole is not.
func (r *Reader) Stats() Stats {
	s := Stats{
		BytesServed:    r.st.bytesServed.Load(),
		BlocksVerified: r.st.verified.Load(),
		MemHits:        r.st.memHits.Load(),
		DiskHits:       r.st.diskHits.Load(),
		Joined:         r.st.joined.Load(),
		NetworkFetches: r.st.fetches.Load(),
		Requests:       r.st.requests.Load(),
		Retries:        r.st.retries.Load(),
		Mismatches:     r.st.mismatches.Load(),
		OutboardLoads:  r.st.outboardLoads.Load(),
		Readaheads:     r.st.readaheads.Load(),

		ReadaheadSkipped:   r.st.aheadSkipped.Load(),
		ReadaheadBudget:    r.budget.max,
		ReadaheadBytes:     r.budget.bytes(),
		ReadaheadWindowMax: r.st.windowMax.Load(),
		ReadaheadResets:    r.st.aheadResets.Load(),

		FreshFlights:   r.st.freshFlights.Load(),
		VersionMissing: r.st.versionMissing.Load(),
		FetchFailed:    r.st.fetchFailed.Load(),

		EventsUnrecorded: r.st.eventsUnrecorded.Load(),

		PassthroughHanded:        r.st.backHanded.Load(),
		PassthroughRefused:       r.st.backRefused.Load(),
		PassthroughVerified:      r.st.backVerified.Load(),
		PassthroughBytesVerified: r.st.backBytes.Load(),
		PassthroughBytesRead:     r.st.backRead.Load(),

		RunsCut:          r.st.runsCut.Load(),
		Lost:             r.st.lost.Load(),
		ReadaheadStreams: r.budget.streamCount(),

		Disk: r.disk.Stats(),
		Pool: r.pool.Stats(),
	}
	if r.mem != nil {
		s.Mem = r.mem.Stats()
	}
	return s
}
