// Package blocks is the verified block reader of the pinfs read path:
//
//	ReadAt(member, off) -> block index -> memory tier -> disk tier
//	  -> on a miss: one shared fetch per block (ranged read of the exact object)
//	  -> verify the block against the member's BLAKE3 digest (Bao outboard)
//	  -> only verified bytes enter a cache tier or the caller's buffer
//
// A member is read in blocks of BlockSize bytes. Block i covers the member's
// bytes [i*BlockSize, min((i+1)*BlockSize, Size)); since BlockSize is a
// multiple of b3.GroupSize every block can be verified on its own.
//
// # Verification
//
// Memory-tier blocks were verified before they entered the tier and are
// served as they are. Every disk-tier hit is verified; one that fails is
// removed, reported as a "mismatch" event From "disk", and fetched again:
// for the reader that is not an error. A block fetched from the store that
// fails is fetched once more after the outboard has been reloaded with
// fresh=true; if it fails again ReadAt returns an error wrapping
// b3.ErrMismatch after a "mismatch" event From "network" has been reported.
// No failure is remembered: the next read of the block tries again.
//
// # Shared fetches
//
// Concurrent readers of one block share one fetch (a flight). The flight
// runs on the Reader's own context, detached from every reader: a reader
// whose context is canceled stops waiting and returns ctx.Err(), while the
// flight goes on for the others and still fills the caches. Close cancels
// the flights that are still running and waits for them.
//
// # Storage errors
//
// Throttling, server errors, resets and timeouts are retried with
// exponential backoff, up to Config.Attempts requests per fetch. A body cut
// short keeps the bytes received and asks only for the rest of the block; a
// body that delivers nothing for Config.StallTimeout is cut off and retried.
// store.ErrNotFound (the pinned version is gone) is reported as a
// "version_missing" event, store.ErrAccessDenied and the other store
// sentinels fail at once, and a fetch that runs out of attempts is reported
// as "fetch_failed". Returned errors wrap the cause, so errors.Is finds the
// store sentinel, b3.ErrMismatch or context.Canceled.
package blocks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/verify/b3"
)

// BlockSize is the size of a block in bytes (1 MiB).
const BlockSize = cache.BlockSize

// Event kinds.
const (
	KindMismatch       = "mismatch"        // block bytes failed verification
	KindVersionMissing = "version_missing" // the pinned object version does not exist
	KindFetchFailed    = "fetch_failed"    // any other storage failure, after retries
)

// Event sources of a mismatch.
const (
	FromNetwork = "network"
	FromDisk    = "disk"
)

// ErrClosed is returned by ReadAt after Close.
var ErrClosed = errors.New("blocks: reader closed")

// Member is what the reader needs to know about one member.
type Member struct {
	Path, ID string // for events only
	Digest   b3.Sum
	Size     int64
	Object   store.Object // the exact version (or CAS blob) its bytes come from
}

// Outboards returns the Bao outboard of a member (stored at pin time for
// members larger than b3.GroupSize). fresh=true bypasses any local copy and
// reads it from the store again; the Reader asks for that once after a
// verification failure, in case a cached outboard was bad.
type Outboards interface {
	Outboard(ctx context.Context, d b3.Sum, size int64, fresh bool) ([]byte, error)
}

// Event is an integrity or storage event on the read path. Off and Len are
// the byte range of the block concerned; From is set for mismatches.
type Event struct {
	Kind   string // KindMismatch, KindVersionMissing or KindFetchFailed
	Member *Member
	Off    int64
	Len    int64
	From   string // FromNetwork or FromDisk
	Err    error
}

// Reporter receives events. Report must return only once the event is
// durable: the read that failed waits for it before it returns. Report is
// called from the Reader's shared fetches, possibly concurrently.
type Reporter interface {
	Report(ctx context.Context, ev Event)
}

// Config configures a Reader. Objects and Outboards are required; a zero
// value elsewhere means the default.
type Config struct {
	Objects   store.ObjectReader
	Outboards Outboards
	// MemBytes is the memory tier's budget in bytes; <= 0 disables the tier.
	MemBytes int64
	// Disk is the disk tier; nil (or a Disk opened with limit 0) disables it.
	// The caller owns it; several Readers may share one.
	Disk *cache.Disk
	// Reporter receives events; nil drops them.
	Reporter Reporter

	// OutboardBytes bounds the outboards kept in memory (default 64 MiB).
	// The outboard in use is kept even if it alone is larger.
	OutboardBytes int64
	// Attempts is the number of requests one fetch may make (default 5).
	Attempts int
	// Backoff is the wait before the first retry (default 100 ms); it
	// doubles for each further retry, up to MaxBackoff (default 5 s).
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
	// Readahead is the most blocks read ahead of a sequential reader, and
	// the most readahead fetches in flight at once (default 16; < 0 disables).
	Readahead int
	// SpanBlocks is the most consecutive blocks a sequential reader's
	// fetch asks for in one request (default 8: one 8 MiB request, as fast as the best raw GETs here; 1 disables spans).
	SpanBlocks int
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
	if c.Attempts <= 0 {
		c.Attempts = 5
	}
	def(&c.Backoff, 100*time.Millisecond)
	def(&c.MaxBackoff, 5*time.Second)
	def(&c.StallTimeout, 30*time.Second)
	def(&c.ReadTimeout, 60*time.Second)
	if c.Readahead == 0 {
		c.Readahead = 16
	}
	if c.SpanBlocks <= 0 {
		c.SpanBlocks = 8
	}
}

// Reader reads members block by block and verifies every block before any
// of its bytes are cached or returned. Its methods are safe for concurrent
// use, except Close, which must not run concurrently with ReadAt.
type Reader struct {
	cfg  Config
	mem  *cache.Mem  // nil: memory tier disabled
	disk *cache.Disk // nil: disk tier disabled
	obs  *outboardCache
	// recent keeps the last blocks loaded, so that readahead is never
	// lost to the memory tier's admission policy.
	recent *recent

	// ctx is the context of every shared fetch; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // running flights

	// mu guards flights, seq and closed.
	mu      sync.Mutex
	flights map[cache.Key]*flight
	seq     map[b3.Sum]*seqState
	closed  bool

	// ahead holds one token per readahead flight in progress.
	ahead chan struct{}

	st counters
}

// New returns a Reader for cfg. The caller must Close it.
func New(cfg Config) (*Reader, error) {
	if cfg.Objects == nil || cfg.Outboards == nil {
		return nil, errors.New("blocks: Config.Objects and Config.Outboards are required")
	}
	cfg.setDefaults()
	r := &Reader{
		cfg:     cfg,
		disk:    cfg.Disk,
		flights: make(map[cache.Key]*flight),
		seq:     make(map[b3.Sum]*seqState),
		ahead:   make(chan struct{}, max(cfg.Readahead, 1)),
	}
	r.obs = newOutboardCache(cfg.OutboardBytes)
	r.recent = newRecent(2 * int64(cfg.Readahead+cfg.SpanBlocks) * BlockSize)
	if cfg.MemBytes > 0 {
		m, err := cache.NewMem(cfg.MemBytes)
		if err != nil {
			return nil, err
		}
		r.mem = m
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// Close cancels the shared fetches still running, waits for them, and
// releases the memory tier. It must be called once no ReadAt is running.
// It does not close Config.Disk.
func (r *Reader) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	if r.mem != nil {
		r.mem.Close()
	}
	return nil
}

// ReadAt reads len(p) bytes of m starting at off into p, and returns the
// number of bytes read. Every byte it returns has been verified against
// m.Digest.
//
// ReadAt follows io.ReaderAt's EOF convention: n < len(p) only when the
// read reaches the end of the member (err == io.EOF) or fails (err says
// why, and p[:n] holds verified bytes). A read that fills p exactly up to
// the end of the member returns n == len(p) and a nil error; len(p) == 0
// returns 0, nil at any offset. A canceled ctx makes ReadAt return
// ctx.Err() promptly, while a fetch it started goes on for other readers.
func (r *Reader) ReadAt(ctx context.Context, m *Member, p []byte, off int64) (int, error) {
	switch {
	case off < 0:
		return 0, fmt.Errorf("blocks: %s: negative offset %d", m.Path, off)
	case m.Size < 0:
		return 0, fmt.Errorf("blocks: %s: negative size %d", m.Path, m.Size)
	case len(p) == 0:
		return 0, nil
	case off >= m.Size:
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), m.Size)
	first, last := off/BlockSize, (end-1)/BlockSize
	r.readahead(m, first, last)
	// The later blocks of a read that spans several load in parallel; each
	// is waited for in its own flight, so that a flight that fails is not
	// started again by the same read.
	var later []pending
	for i := first + 1; i <= last; i++ {
		later = append(later, r.pend(m, i))
	}
	n := 0
	for i := first; i <= last; i++ {
		var b []byte
		var err error
		if i == first {
			b, err = r.block(ctx, m, i)
		} else {
			b, err = later[i-first-1].get(ctx)
		}
		if err != nil {
			r.st.bytesServed.Add(int64(n))
			return n, err
		}
		bo := i * BlockSize
		n += copy(p[n:], b[max(off, bo)-bo:min(end, bo+int64(len(b)))-bo])
	}
	r.st.bytesServed.Add(int64(n))
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// blockRange returns the byte range of block i of m.
func blockRange(m *Member, i int64) (off, n int64) {
	off = i * BlockSize
	return off, min(BlockSize, m.Size-off)
}

// numBlocks returns the number of blocks of a member of size bytes.
func numBlocks(size int64) int64 { return (size + BlockSize - 1) / BlockSize }

func key(m *Member, i int64) cache.Key { return cache.Key{Digest: m.Digest, Index: i} }

// report hands ev to the Reporter and returns once it has been recorded.
func (r *Reader) report(ctx context.Context, ev Event) {
	if r.cfg.Reporter != nil {
		r.cfg.Reporter.Report(ctx, ev)
	}
}
