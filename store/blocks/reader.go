package blocks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/store/lru"
	"github.com/pinfs/pinfs/store/pool"
	"github.com/pinfs/pinfs/verify/b3"
)

// BlockSize is the size of a block in bytes (1 MiB).
const BlockSize = cache.BlockSize

// Errors of the Reader; returned errors wrap them.
var (
	// ErrClosed: the Reader was closed before or during the read.
	ErrClosed = errors.New("blocks: reader closed")
	// ErrReadTimeout: the store did not deliver a block within
	// Config.ReadTimeout.
	ErrReadTimeout = errors.New("blocks: read timeout")
	// ErrNotRecorded: the Reporter could not make an event of the read
	// durable (of its flight, or one owed by an earlier load of the
	// block), so the read fails.
	ErrNotRecorded = errors.New("blocks: event not recorded")
)

// Reader reads members block by block and verifies every block before any
// of its bytes are cached or returned. Its methods are safe for concurrent
// use, Close included.
type Reader struct {
	cfg  Config
	mem  *cache.Mem  // never nil: at least the front that keeps blocks read ahead
	disk *cache.Disk // nil: disk tier disabled

	pool    *pool.Pool                        // every block's memory
	ownPool bool                              // made by New: closed by Close
	calls   lru.Group[cache.Key, *pool.Block] // one per block loading: see callRef
	obs     *lru.Cache[b3.Sum, []byte]        // outboards, least recently used out
	obLoads lru.Group[obKey, []byte]          // one per outboard loading

	// ctx is the context of every flight; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // running flights; Add only under mu, while !closed
	reads  sync.WaitGroup // reads in progress; Add only under mu, while !closed

	// lim spaces the requests of every flight while the store throttles.
	lim *limiter

	// fails remembers, for failWindow, the blocks whose read failed for a
	// reason that may pass.
	fails *failures

	// owed keeps the events the Reporter could not make durable until a
	// read of their block records them; replays is one settle per block.
	owed    owed
	replays lru.Group[cache.Key, struct{}]

	// mu guards seq's states and closed.
	mu     sync.Mutex
	seq    *lru.Cache[b3.Sum, *seqState]
	closed bool

	// budget holds the blocks readahead and Warm requested and that have
	// not been read yet.
	budget *budget

	// stamps holds the stamp of each member file verified for
	// passthrough, least recently handed over out; backs is one
	// verification per member file (backing.go).
	stamps *lru.Cache[b3.Sum, stamp]
	backs  lru.Group[b3.Sum, stamp]

	st counters
}

// New returns a Reader for cfg. The caller must Close it.
func New(cfg Config) (*Reader, error) {
	if cfg.Objects == nil || cfg.Outboards == nil {
		return nil, errors.New("blocks: Config.Objects and Config.Outboards are required")
	}
	cfg.setDefaults()
	r := &Reader{
		cfg:    cfg,
		disk:   cfg.Disk,
		obs:    lru.New[b3.Sum](cfg.OutboardBytes, func(ob []byte) int64 { return int64(len(ob)) }),
		seq:    lru.New[b3.Sum](maxSeq, func(*seqState) int64 { return 1 }),
		stamps: lru.New[b3.Sum](maxStamps, func(stamp) int64 { return 1 }),
		lim:    newLimiter(cfg.Backoff, min(cfg.MaxBackoff, maxGap)),
		fails:  newFailures(),
	}
	front, memBytes := frontOf(cfg.MemBytes, cfg.SpanBlocks)
	r.pool = cfg.Pool
	if r.pool == nil {
		p, err := pool.New(memBytes + front + cfg.ReadaheadBudget + PoolReserve)
		if err != nil {
			return nil, err
		}
		r.pool, r.ownPool = p, true
	}
	m, err := cache.NewMem(memBytes, cache.WithFront(front))
	if err != nil {
		r.closePool()
		return nil, err
	}
	r.mem = m
	r.budget = newBudget(cfg.ReadaheadBudget)
	// A load that waits for a slot first asks for the ones the Reader can
	// do without: the front's older blocks, blocks read ahead and left.
	r.pool.OnShort(func() {
		r.mem.TrimFront()
		r.budget.giveBack()
	})
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// frontOf returns the size of the memory tier's front and what is left of
// memBytes for ristretto: the front is part of the memory tier's budget
// (a quarter of it at most, frontRuns runs at most), so that the tier
// takes no more of the pool than the budget says; a tier of no budget
// still gets a front of two runs, for the runs of misses.
func frontOf(memBytes int64, span int) (front, rest int64) {
	run := int64(span) * BlockSize
	if memBytes <= 0 {
		return 2 * run, 0
	}
	front = min(frontRuns*run, max(memBytes/4, run))
	return front, max(memBytes-front, 0)
}

// frontRuns is the size of the memory tier's front, in runs of
// Config.SpanBlocks blocks: it keeps the last blocks loaded, so that the
// runs of a few readers' misses are not lost to the memory tier's
// admission policy before they are read. Blocks read ahead are kept by
// the budget until they are read.
const frontRuns = 6

// maxGap is the largest gap between two requests of a Reader while the
// store throttles: it never sends less than one request a second.
const maxGap = time.Second

// closeWait bounds how long Close waits for reads, flights and the disk
// writes they queued to end.
const closeWait = 10 * time.Second

// Close refuses new reads (ErrClosed), cancels the flights still running,
// waits for them and for the reads in progress (which then fail with
// ErrClosed), then for the disk tier's queued writes (Disk.Flush: the
// blocks this Reader verified are on disk for the next mount or process
// that opens the directory), and releases the memory tier. It may run
// concurrently with reads. If all that has not ended after closeWait (a
// Reporter that does not return, a disk that hangs), Close returns an
// error and leaves the memory tier to the garbage collector rather than
// close it under them. It does not close Config.Disk.
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
		r.disk.Flush()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(closeWait):
		return fmt.Errorf("blocks: close: reads still running after %v; memory tier left open", closeWait)
	}
	r.mem.Close()
	r.budget.clear()
	if err := r.closePool(); err != nil {
		return fmt.Errorf("blocks: close: %w", err)
	}
	return nil
}

// closePool closes the pool if the Reader made it.
func (r *Reader) closePool() error {
	if !r.ownPool {
		return nil
	}
	return r.pool.Close()
}

// Pool returns the pool that holds the Reader's blocks.
func (r *Reader) Pool() *pool.Pool { return r.pool }

// enter registers a read in progress; it returns false once the Reader is
// closed.
func (r *Reader) enter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.reads.Add(1)
	return true
}
