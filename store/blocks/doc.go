// Package blocks is the verified block reader of the pinfs read path.
// A member is read in blocks of BlockSize bytes; block i covers the
// member's bytes [i*BlockSize, min((i+1)*BlockSize, Size)), and since
// BlockSize is a multiple of b3.GroupSize every block can be verified on
// its own. A read travels through the files in this order:
//
//	read.go     Slices/ReadAt: each block from the memory tier (or the
//	            budget, read ahead), or its call (pend, get)
//	plan.go     whether the reader is sequential, which blocks a miss asks
//	            for in one request, what is read ahead (readahead)
//	flight.go   a miss is one flight over a run of blocks: its pool slots,
//	            one request sent together with the load of the member's
//	            outboard, the blocks it holds alone (load: disk tier first)
//	request.go  the ranged request, its stall watchdog, the one retry loop
//	landing.go  each block verified as soon as its bytes and the outboard
//	            are in, and completed
//	verify.go   the verifier and the outboards
//	badcopy.go  a copy that fails verification: rechecked, refetched,
//	            reported
//	cache.go    a verified block goes to the memory tier, the budget, the
//	            disk tier's queue and its call's waiters
//	span.go     what a read hands its caller: blocks held until Release
//
// reader.go holds the Reader and its lifetime; budget.go bounds the
// memory of readahead and shares it between streams; events.go the
// events and their reporting; failures.go the failures remembered for a
// moment (see below); backing.go and backingverify.go the member files
// handed to the kernel for passthrough.
//
// # Memory
//
// Every block lives in a slot of a store/pool Pool (Config.Pool), off the
// Go heap, from the moment a flight takes the slot for its request until
// the last holder releases it: the flight (pool.Flight) until the block
// verifies, its call (pool.Call) until it is forgotten, the memory tier
// (pool.Memory), the budget while it waits unread (pool.Readahead), the
// disk tier's write-behind queue (pool.DiskQueue), and each read that
// returns it (pool.Reader, in a Span: a FUSE reply until go-fuse's Done,
// pinfs serve's response until it is written as pool.Serve). Only a
// verified block leaves the flight, so only verified bytes are ever
// shared. A flight waits for its first slot (bounded by its deadline)
// and takes the others only if free: a run the pool cannot fill is cut,
// and its other blocks load alone. A waiter takes its reference with
// TryRetain (cache.go): a block released before it could is loaded
// again, never read from a reused slot.
//
// # Verification
//
// Only verified bytes enter the memory tier or a caller's buffer. A member
// of one block is fetched whole and verified against its digest, with no
// outboard. A larger member's blocks are verified with its Bao outboard,
// which a flight loads (unless the Reader has it cached) together with its
// request rather than before it: the first byte costs one round trip, not
// two. The request's bytes land in their buffers meanwhile; each block is
// verified once its bytes and the outboard are both in, never against a
// missing outboard. An outboard that cannot be loaded ends the request,
// whose bytes could not be verified, and fails every block of the flight
// with its error. Memory hits were verified before they entered the tier
// and are served as they are. Every disk-tier hit is verified; one that
// fails is removed, reported as a "mismatch" event From "disk", and
// fetched again: for the reader that is not an error. A block fetched from the store that fails
// (alone or in a run) is checked against a reloaded outboard (fresh=true)
// and then fetched once more alone (through a tier, past its cache). A
// copy of the wrong length from a tier (its Content-Length says so) is a
// bad copy too, and a tier's answer that ends early or stalls is resumed
// past the tier's cache (a truncated cache file: badcopy.go). A
// refetched copy that fails as well is read from the tier's fallback
// store (Config.Fallback), if there is one. One "mismatch" event From
// "network" ("tier" through a tier) is reported once the outcome is
// known: saying "healed" when a later copy verifies, and otherwise before
// the read returns an error wrapping b3.ErrMismatch. Such a failure is
// not remembered: the next read of the block tries again (see Storage
// errors for those that are).
//
// # Passthrough
//
// Reader.Backing hands the disk tier's whole-member file of a member
// (cache.Disk.MemberPath) to the caller, for FUSE passthrough: the kernel
// then reads the file itself and no read of that open reaches the Reader,
// so the file must hold exactly the member's bytes before it is handed
// over, not just block by block as it is read. Backing opens it with
// O_NOFOLLOW and checks, on the descriptor, that it is a regular file of
// the daemon's user, mode 0400, of the member's size, in a 0700 cache dir
// of the same user. It then verifies the whole file against the member's
// digest (its outboard, or the digest alone for a member of one block),
// in shares read in parallel by GOMAXPROCS goroutines, under a read
// lease (stamplease.go), unless the file's stamp (device, inode, size,
// mtime, ctime) is one recorded after an earlier verification: by this
// Reader in memory, or durably by any Reader of this boot as a trusted.*
// attribute of the file's directory (stamp.go), or the file is a verity
// file stamped as the member's (stampverity.go). The stamp is recorded
// only if it did not change during the read, and made durable only if
// the lease held until the clock passed the file's ctime. Concurrent opens of a member share one verification, which
// goes on when a waiter gives up. A file last touched more than a minute
// ago is touched before it is verified: that is the disk tier's
// least-recently-used mark for member files (the tier does not touch
// them, as that moves ctime). A file that fails verification, or that is
// marked complete (ours, 0400) with the wrong size, is removed and
// reported as a "mismatch" event From "disk" over the whole member; a
// file that fails the other checks is refused and left where it is (it
// may be one the tier is still writing, or not ours). Either way Backing
// returns an error wrapping ErrNoBacking and the open is served through
// the Reader, block by block, as usual; a mismatch the Reporter cannot
// record is owed to the member's first block, as for any event.
// Where the kernel has fs-verity, a verified file is also made a verity
// file (the kernel then checks every page it reads); this machine's
// kernel lacks it, so that path is untested here.
//
// # Flights
//
// Every block being loaded has one call (store/lru's Group), which all its
// readers join: concurrent readers of a block share one load. A read that
// misses starts a flight over the run of blocks around it that have no
// call and are in neither tier: for a sequential reader its aligned group
// of Config.SpanBlocks blocks, otherwise the block alone. One goroutine
// runs each flight, on the Reader's own context, detached from every
// reader: a reader whose context is canceled stops waiting and returns
// ctx.Err(), while the flight goes on for the others and still fills the
// caches. A reader that joined a call started by someone else (another
// read, readahead) which then fails for a reason that may pass
// (throttling, a timeout, a broken connection) gets one fresh call of its
// own, which ends by that reader's own deadline. Blocks of a sequential
// stream of a member larger than the disk tier's whole budget are not
// written to disk: they would only push out everything else. Close refuses
// new reads, cancels the flights that are still running and waits for them
// and for the reads in progress.
//
// # Readahead
//
// A sequential reader's blocks ahead are started the same way before it
// reaches them, as runs of SpanBlocks blocks in parallel (one request
// each). Its window starts at one block and doubles with every read that
// goes on sequentially, up to Config.ReadaheadMax; reads of the stream
// that arrive a little out of order (the kernel's own readahead is served
// in parallel) keep it open, and a jump closes it (plan.go). A random
// reader gets no readahead and no runs. All readahead and Warm of the
// Reader share one budget, Config.ReadaheadBudget, in bytes requested and
// not yet read (budget.go): the budget keeps each block it loaded until
// its reader comes, so that no block read ahead is lost to the memory
// tier; readahead that finds no room is skipped, Warm waits for room, and
// a reader's own miss never waits. The memory tier finds a block as soon
// as it is put (store/cache's front).
//
// # Storage errors
//
// The Reader is the one retry layer of the read path for block bytes (the
// store makes one attempt per ranged request), with one retry loop for
// block requests and outboard loads. Every request first waits for a slot
// of a limiter shared by all flights: a store.ErrThrottled answer halves
// the rate at which requests may start and holds them all off for a while;
// answers that are not throttled raise it again. Every failure that may
// pass — throttling, server errors, refused or reset connections,
// timeouts, a stalled or cut body — is retried with jittered exponential
// backoff (Config.Backoff doubling up to Config.MaxBackoff, never less
// than 1 ms) until the read timeout; so is loading a member's outboard. A
// body cut short keeps the bytes received and asks only for the rest (at
// once if it delivered 64 KiB or more, after a backoff otherwise); a body
// that delivers nothing for Config.StallTimeout is cut off and retried. A
// flight is bounded by Config.ReadTimeout from its start: past it, its
// blocks fail with ErrReadTimeout wrapping the last failure. Config.Attempts,
// if set, also caps the failed tries (other than throttled ones) of one
// request or outboard load. store.ErrNotFound (the pinned version is gone)
// is reported as a "version_missing" event, store.ErrAccessDenied,
// store.ErrBadResponse (the wrong range) and the other permanent store
// answers fail at once, and a load that runs out of time (or attempts) is
// reported as "fetch_failed", one event per block. Returned errors wrap the
// cause, so errors.Is finds the store sentinel, ErrReadTimeout,
// b3.ErrMismatch or context.Canceled (the reader's own context only).
//
// # Failures remembered
//
// A read that returns a failure that may pass (a timeout, throttling, a
// 5xx) remembers it for its block for failWindow (5 s): every read of the
// block within that time fails at once with it, without a request or an
// event; past it the block is fetched afresh. The kernel reads a page once
// more after its read failed, and that second read would otherwise wait a
// whole read timeout again. A read that fails at once does not restart the
// window; a read that was interrupted, readahead no read waited for and
// Warm remember nothing; a block that loads is forgotten. Final failures
// (verification, permanent store answers, ErrNotRecorded) are never
// remembered.
//
// # Events
//
// Every event is handed to Config.Reporter before the read it concerns
// returns. If the Reporter cannot make an event durable, that read fails
// with an error wrapping ErrNotRecorded, even when the block itself was
// healed (a damaged copy replaced by a good one): nothing is served that
// the run record does not account for. The event is then owed to its
// block: a flight may have no reader waiting (readahead, Warm), and the
// next read of the block, which would fetch it afresh, could otherwise
// succeed with the event lost. That read, and every later one, hands the
// owed events to the Reporter again before anything else (one attempt
// per block at a time, so each is recorded once) and fails with
// ErrNotRecorded while they still cannot be recorded; once they are, the
// block reads as usual. Owed events are bounded (maxOwed); past the bound
// an event fails only the readers of its flight.
package blocks
