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
// fails (alone or as part of a span request) is fetched once more alone,
// after the outboard has been reloaded with fresh=true. One "mismatch"
// event From "network" is reported once the outcome is known: saying
// "healed" when the refetched copy verifies, and otherwise before ReadAt
// returns an error wrapping b3.ErrMismatch. No failure is remembered: the
// next read of the block tries again.
//
// # Shared fetches
//
// Concurrent readers of one block share one fetch (a flight). The flight
// runs on the Reader's own context, detached from every reader: a reader
// whose context is canceled stops waiting and returns ctx.Err(), while the
// flight goes on for the others and still fills the caches. A reader that
// joined a flight started by someone else (another read, readahead) which
// then fails for a reason that may pass (throttling, a timeout, a broken
// connection) gets one fresh flight of its own. Close refuses new reads,
// cancels the flights that are still running and waits for them and for
// the reads in progress.
//
// # Storage errors
//
// The Reader is the one retry layer of the read path for block bytes (the
// store makes one attempt per ranged request). Every request first waits
// for a slot of a limiter shared by all fetches: a store.ErrThrottled
// answer halves the rate at which requests may start and holds them all
// off for a while; answers that are not throttled raise it again. Every
// failure that may pass — throttling, server errors, refused or reset
// connections, timeouts, a stalled or cut body — is retried with jittered
// exponential backoff (Config.Backoff doubling up to Config.MaxBackoff,
// never less than 1 ms) until the read timeout; so is loading a member's
// outboard. A body cut short keeps the bytes received and asks only for
// the rest of the block (at once if it delivered 64 KiB or more, after a
// backoff otherwise); a body that delivers nothing for Config.StallTimeout
// is cut off and retried. A block load is bounded by Config.ReadTimeout
// from the read that started it: past it, it fails with ErrReadTimeout
// wrapping the last failure. Config.Attempts, if set, also caps the
// failed requests (other than throttled ones) of one fetch and the tries
// of one outboard load. store.ErrNotFound (the pinned version is gone) is
// reported as a "version_missing" event, store.ErrAccessDenied,
// store.ErrBadResponse (the wrong range) and the other permanent store
// answers fail at once, and a fetch that runs out of
// time (or attempts) is reported as "fetch_failed". Returned errors wrap
// the cause, so errors.Is finds the store sentinel, ErrReadTimeout,
// b3.ErrMismatch or context.Canceled (the reader's own context only).
//
// # Events
//
// Every event is handed to Config.Reporter before the read it concerns
// returns. If the Reporter cannot make an event durable, that read fails
// with an error wrapping ErrNotRecorded, even when the block itself was
// healed (a damaged copy replaced by a good one): nothing is served that
// the run record does not account for.
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

// Errors of the Reader; returned errors wrap them.
var (
	// ErrClosed: the Reader was closed before or during the read.
	ErrClosed = errors.New("blocks: reader closed")
	// ErrReadTimeout: the store did not deliver a block within
	// Config.ReadTimeout.
	ErrReadTimeout = errors.New("blocks: read timeout")
	// ErrNotRecorded: the Reporter could not make an event of the read
	// durable, so the read fails.
	ErrNotRecorded = errors.New("blocks: event not recorded")
)

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
// durable, or an error if it cannot be made durable: the read the event
// concerns waits for it, and fails with ErrNotRecorded on an error. Report
// is called from the Reader's shared fetches, possibly concurrently.
type Reporter interface {
	Report(ctx context.Context, ev Event) error
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
// use, Close included.
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
	reads  sync.WaitGroup // ReadAt calls in progress; Add only under mu, while !closed

	// lim spaces the requests of every fetch while the store throttles.
	lim *limiter

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
		lim:     newLimiter(cfg.Backoff, min(cfg.MaxBackoff, maxGap)),
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

// maxGap is the largest gap between two requests of a Reader while the
// store throttles: it never sends less than one request a second.
const maxGap = time.Second

// closeWait bounds how long Close waits for reads and fetches to end.
const closeWait = 10 * time.Second

// Close refuses new reads (ErrClosed), cancels the shared fetches still
// running, waits for them and for the ReadAt calls in progress (which then
// fail with ErrClosed), and releases the memory tier. It may run
// concurrently with ReadAt. If reads or fetches are still running after
// closeWait (a Reporter that does not return, say), Close returns an error
// and leaves the memory tier to the garbage collector rather than close it
// under them. It does not close Config.Disk.
func (r *Reader) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	drained := make(chan struct{})
	go func() {
		r.reads.Wait()
		r.wg.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(closeWait):
		return fmt.Errorf("blocks: close: reads still running after %v; memory tier left open", closeWait)
	}
	if r.mem != nil {
		r.mem.Close()
	}
	return nil
}

// enter registers a ReadAt in progress; it returns false once the Reader
// is closed.
func (r *Reader) enter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.reads.Add(1)
	return true
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
// The blocks ReadAt loads are bounded by Config.ReadTimeout from its start
// (ErrReadTimeout); a block whose flight it joined and which failed for a
// reason that may pass is loaded once more within that time.
func (r *Reader) ReadAt(ctx context.Context, m *Member, p []byte, off int64) (int, error) {
	vs, n, err := r.Slices(ctx, m, off, len(p))
	k := 0
	for _, v := range vs {
		k += copy(p[k:], v)
	}
	return n, err
}

// Slices is ReadAt without the copy: it returns the verified bytes of m
// in [off, off+n) as sub-slices of cached blocks, in order, and their
// total length. The slices are shared with the caches and other readers
// and must never be modified. The EOF convention and the errors are
// ReadAt's: a total < n comes with io.EOF at the end of the member or with
// the error that stopped the read (the slices then hold the verified
// bytes before it).
func (r *Reader) Slices(ctx context.Context, m *Member, off int64, n int) ([][]byte, int, error) {
	switch {
	case off < 0:
		return nil, 0, fmt.Errorf("blocks: %s: negative offset %d", m.Path, off)
	case m.Size < 0:
		return nil, 0, fmt.Errorf("blocks: %s: negative size %d", m.Path, m.Size)
	case n <= 0:
		return nil, 0, nil
	case off >= m.Size:
		return nil, 0, io.EOF
	}
	if !r.enter() {
		return nil, 0, fmt.Errorf("%w: read of %s", ErrClosed, m.Path)
	}
	defer r.reads.Done()
	deadline := time.Now().Add(r.cfg.ReadTimeout)
	end := min(off+int64(n), m.Size)
	first, last := off/BlockSize, (end-1)/BlockSize
	r.readahead(m, first, last)
	// The later blocks of a read that spans several load in parallel; each
	// is waited for in its own flight, so that a flight that fails is not
	// started again by the same read.
	var later []pending
	for i := first + 1; i <= last; i++ {
		later = append(later, r.pend(m, i, deadline))
	}
	vs := make([][]byte, 0, last-first+1)
	got := 0
	for i := first; i <= last; i++ {
		var pd pending
		if i == first {
			pd = r.pend(m, i, deadline)
		} else {
			pd = later[i-first-1]
		}
		b, err := r.get(ctx, m, i, pd, deadline)
		if err != nil {
			r.st.bytesServed.Add(int64(got))
			return vs, got, err
		}
		bo := i * BlockSize
		v := b[max(off, bo)-bo : min(end, bo+int64(len(b)))-bo]
		vs = append(vs, v)
		got += len(v)
	}
	r.st.bytesServed.Add(int64(got))
	if got < n {
		return vs, got, io.EOF
	}
	return vs, got, nil
}

// Warm loads every block of m that the disk tier does not hold, verified,
// into the caches, calling progress with the bytes of each block as it is
// done (cached already or loaded). It returns the first error.
func (r *Reader) Warm(ctx context.Context, m *Member, progress func(int64)) error {
	chunk := int64(r.cfg.SpanBlocks) * BlockSize
	for off := int64(0); off < m.Size; off += chunk {
		n := min(chunk, m.Size-off)
		if _, _, err := r.Slices(ctx, m, off, int(n)); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if progress != nil {
			progress(n)
		}
	}
	return nil
}

// blockRange returns the byte range of block i of m.
func blockRange(m *Member, i int64) (off, n int64) {
	off = i * BlockSize
	return off, min(BlockSize, m.Size-off)
}

// numBlocks returns the number of blocks of a member of size bytes.
func numBlocks(size int64) int64 { return (size + BlockSize - 1) / BlockSize }

func key(m *Member, i int64) cache.Key { return cache.Key{Digest: m.Digest, Index: i} }

// report counts ev and hands it to the Reporter, and returns once it has
// been recorded. If it could not be, report counts that and returns an
// error wrapping ErrNotRecorded and cause (the error of the read, which
// may be nil for a healed block); otherwise it returns cause.
func (r *Reader) report(ev Event, cause error) error {
	switch ev.Kind {
	case KindVersionMissing:
		r.st.versionMissing.Add(1)
	case KindFetchFailed:
		r.st.fetchFailed.Add(1)
	}
	if r.cfg.Reporter == nil {
		return cause
	}
	err := r.cfg.Reporter.Report(r.ctx, ev)
	if err == nil {
		return cause
	}
	r.st.eventsUnrecorded.Add(1)
	if cause == nil {
		return fmt.Errorf("%w: %s event of %s bytes %d+%d: %w", ErrNotRecorded, ev.Kind, ev.Member.Path, ev.Off, ev.Len, err)
	}
	return fmt.Errorf("%w (%w: %s event: %v)", cause, ErrNotRecorded, ev.Kind, err)
}
