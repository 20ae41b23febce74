package blocks

import (
	"context"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/store/pool"
	"github.com/pinfs/pinfs/verify/b3"
)

// Member is what the reader needs to know about one member.
type Member struct {
	Path, ID string // for events only
	Digest   b3.Sum
	Size     int64
	Object   store.Object // the exact version (or CAS blob) its bytes come from
	// Snapshot and Index name the member for Config.Content: the digest
	// of the manifest whose table names it and its ordinal there.
	Snapshot string
	Index    int
}

// Outboards returns the Bao outboard of a member (stored at pin time for
// members larger than b3.GroupSize). fresh=true bypasses any local copy and
// reads it from the store again; the Reader asks for that once after a
// verification failure, in case a cached outboard was bad.
type Outboards interface {
	Outboard(ctx context.Context, d b3.Sum, size int64, fresh bool) ([]byte, error)
}

// Config configures a Reader. Objects and Outboards are required; a zero
// value elsewhere means the default.
type Config struct {
	Objects   store.ObjectReader
	Outboards Outboards
	// Content, if set, reads member bytes instead of Objects: by content,
	// through a shared cache tier (store.ContentReader). A copy from it
	// that fails verification is fetched once more fresh (bypassing the
	// tier's cache, which replaces its copy) and reported as a "mismatch"
	// From "tier".
	Content store.ContentReader
	// Fallback, if set with Content, reads a block whose copies through
	// Content failed verification twice (the tier's, then the one that
	// bypassed its cache): the tier's fallback store
	// (store/fallback.Store.Fallback). Its copy is verified the same way.
	Fallback store.ContentReader
	// MemBytes is the memory tier's budget in bytes; <= 0 disables the tier.
	MemBytes int64
	// Disk is the disk tier; nil (or a Disk opened with limit 0) disables it.
	// The caller owns it; several Readers may share one.
	Disk *cache.Disk
	// Reporter receives events; nil drops them.
	Reporter Reporter
	// LocalCAS says the content-addressed members (Object.CAS) of
	// Objects are files on this machine (a local store), as near as the
	// disk tier itself: their blocks are not copied into the disk tier as
	// they are read, which would cost a second write of every byte (the
	// largest CPU cost per byte of such a read) and a second copy in the
	// page cache, and save nothing. Warm still writes (pinfs warm fills
	// the disk tier on purpose, for passthrough). Members read by version
	// (S3 objects a local store points at) are copied as usual.
	LocalCAS bool
	// Pool holds every block the Reader loads, off the Go heap (see
	// store/pool). nil: the Reader makes its own, of MemBytes +
	// ReadaheadBudget + PoolReserve, and closes it with the Reader. A
	// pool given here may be shared by several Readers; its owner closes
	// it.
	Pool *pool.Pool

	// OutboardBytes bounds the outboards kept in memory (default 64 MiB).
	// The outboard in use is kept even if it alone is larger.
	OutboardBytes int64
	// Attempts, if > 0, caps the requests of one fetch that may fail other
	// than by throttling, and the tries of one outboard load, in addition
	// to ReadTimeout. The default (0) leaves ReadTimeout as the only
	// bound: every failure that may pass is retried until then.
	Attempts int
	// Backoff is the wait before the first retry (default 100 ms); it
	// doubles for each further retry, up to MaxBackoff (default 5 s).
	// While the store throttles, the Reader's requests start at least
	// Backoff apart, and at most MaxBackoff or 1 s (the lesser) apart.
	Backoff, MaxBackoff time.Duration
	// StallTimeout cuts off a request that delivers no bytes for this long
	// (default 30 s).
	StallTimeout time.Duration
	// ReadTimeout bounds the time a block load may take, retries and
	// waits for a throttling store included (default 60 s; keep it longer
	// than StallTimeout so that one stalled response can be resumed). A
	// load that runs out of time fails with ErrReadTimeout and a
	// "fetch_failed" event.
	ReadTimeout time.Duration
	// ReadaheadMax is the most bytes read ahead of a sequential reader:
	// its window starts at one block and doubles with every read that
	// goes on sequentially, up to this (default 128 MiB, rounded down to
	// whole blocks, at least one); it is also the most bytes Warm has in
	// flight for one member. < 0 disables readahead.
	ReadaheadMax int64
	// ReadaheadBudget bounds the memory of all readahead and Warm of the
	// Reader (default 256 MiB): the bytes they requested and that are not
	// read yet, in flight or loaded and waiting for their reader (see
	// budget.go).
	ReadaheadBudget int64
	// SpanBlocks is the most consecutive blocks a sequential reader's
	// miss asks for in one request (default 8: one 8 MiB request, as fast
	// as the best raw GETs here; 1 disables runs of more than one block).
	SpanBlocks int
}

// PoolReserve is the room of a Reader's pool beyond its memory tier and
// readahead budget: the blocks of misses in flight, of replies the kernel
// has not taken yet and of the disk tier's write-behind queue.
const PoolReserve = 128 << 20

// The defaults of Config.ReadaheadMax and Config.ReadaheadBudget.
const (
	DefaultReadaheadMax    = 128 << 20
	DefaultReadaheadBudget = 256 << 20
)

// aheadBlocks returns the largest readahead window in blocks (0: no
// readahead).
func (c *Config) aheadBlocks() int64 {
	if c.ReadaheadMax < 0 {
		return 0
	}
	return max(c.ReadaheadMax/BlockSize, 1)
}

func (c *Config) setDefaults() {
	def := func(p *time.Duration, d time.Duration) {
		if *p <= 0 {
			*p = d
		}
	}
	if c.OutboardBytes <= 0 {
		c.OutboardBytes = 64 << 20
	}
	def(&c.Backoff, 100*time.Millisecond)
	def(&c.MaxBackoff, 5*time.Second)
	def(&c.StallTimeout, 30*time.Second)
	def(&c.ReadTimeout, 60*time.Second)
	if c.ReadaheadMax == 0 {
		c.ReadaheadMax = DefaultReadaheadMax
	}
	if c.ReadaheadBudget <= 0 {
		c.ReadaheadBudget = DefaultReadaheadBudget
	}
	if c.SpanBlocks <= 0 {
		c.SpanBlocks = 8
	}
}
