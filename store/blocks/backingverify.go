package blocks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/verify/b3"
)

// verifyChunk is the bytes a worker of verifyFile reads and verifies at
// a time: a multiple of BlockSize (so of b3.GroupSize, as b3.Verify
// needs), large enough that a pread and the walk down the outboard to
// the chunk cost little beside the hashing.
const verifyChunk = 4 * BlockSize

// verifyAhead is how far ahead of the chunk it hashes a worker of
// verifyFile asks the kernel to read the file (MADV_WILLNEED): far enough
// to keep a disk busy while a chunk is hashed.
const verifyAhead = 8 * verifyChunk

// verifyWorkers returns the goroutines a member file is verified with:
// one per core the Go scheduler uses.
func verifyWorkers() int { return runtime.GOMAXPROCS(0) }

// verifyBacking verifies f, m's member file, which checkFile has passed,
// in full against m's digest, and returns the stamp it recorded. It holds
// a read lease on f throughout (freeze). A file whose mtime is older than
// touchAge is touched first: this is the disk tier's least-recently-used
// mark for member files, which the tier itself does not set, as it
// changes ctime and so the stamp. A file whose durable stamp (stamp.go)
// matches it under the lease is not read: its bytes were verified, and
// cannot change while the lease holds, so a touch carries the stamp over.
// A file that fails is damaged (removed and reported). The stamp is
// recorded only if fstat says the same before and after the whole read,
// and not at all while someone has the file open for writing (the lease
// is refused: a page of a writable mapping already dirty takes writes
// that set no time);
// it is made durable too if the lease held until the clock passed the
// file's ctime (settled), as a verity file where the file system has
// fs-verity, else as a ctime stamp.
func (r *Reader) verifyBacking(ctx context.Context, f *os.File, m *Member) (stamp, error) {
	z := freezeFile(f)
	defer z.release()
	st, err := fstat(f)
	if err != nil {
		return stamp{}, err
	}
	kind := noStamp
	if z.ok {
		kind = r.durableKind(f, m, stampOf(&st))
	}
	touched := stale(stampOf(&st))
	if touched {
		// utimensat(fd, NULL, NULL, 0): both times of the open file to now.
		if _, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, f.Fd(), 0, 0, 0, 0, 0); e != 0 {
			return stamp{}, fmt.Errorf("%w: touching %s: %w", ErrNoBacking, f.Name(), e)
		}
		if st, err = fstat(f); err != nil {
			return stamp{}, err
		}
	}
	before := stampOf(&st)
	if kind == noStamp {
		if err := r.verifyBytes(ctx, f, m); err != nil {
			return stamp{}, err
		}
	}
	if st, err = fstat(f); err != nil {
		return stamp{}, err
	}
	if after := stampOf(&st); after != before {
		return stamp{}, fmt.Errorf("%w: %s changed while it was verified", ErrNoBacking, f.Name())
	}
	if z.settled(ctx, before.ctime) {
		switch {
		case kind == noStamp && enableVerity(f, m):
			// Enabling verity set the file's ctime.
			if st, err = fstat(f); err != nil {
				return stamp{}, err
			}
			before = stampOf(&st)
		case kind == noStamp, kind == ctimeStamp && touched:
			r.stampDurably(m, before)
		}
	}
	if !z.writer {
		// A writer's mapping may change the bytes without a time: the
		// next open verifies again.
		r.stamps.Put(m.Digest, before)
	}
	if kind == noStamp {
		r.st.backVerified.Add(1)
		r.st.backBytes.Add(m.Size)
	}
	return before, nil
}

// verifyBytes reads f, m's member file, in full and verifies it against
// m's digest (its outboard, or the digest alone for a member of one
// block); a file that fails is damaged (removed and reported).
func (r *Reader) verifyBytes(ctx context.Context, f *os.File, m *Member) error {
	var ob []byte
	var err error
	if !wholeMember(m) {
		octx, cancel := context.WithTimeout(ctx, r.cfg.ReadTimeout)
		ob, err = r.outboard(octx, m, false)
		cancel()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrNoBacking, err)
		}
	}
	err = r.verifyFile(ctx, f, m, ob, verifyWorkers())
	if errors.Is(err, b3.ErrMismatch) && !wholeMember(m) {
		// A cached outboard may be the bad copy: check against the
		// store's before blaming the file, as a disk hit does.
		octx, cancel := context.WithTimeout(ctx, r.cfg.ReadTimeout)
		fresh, oerr := r.outboard(octx, m, true)
		cancel()
		switch {
		case oerr != nil:
			return fmt.Errorf("%w: %w", ErrNoBacking, oerr)
		case !bytes.Equal(fresh, ob):
			err = r.verifyFile(ctx, f, m, fresh, verifyWorkers())
		}
	}
	if errors.Is(err, b3.ErrMismatch) {
		return r.damaged(f, m, fmt.Errorf("%w: %s: %w", ErrNoBacking, f.Name(), err))
	}
	if err != nil {
		return fmt.Errorf("%w: verifying %s: %w", ErrNoBacking, f.Name(), err)
	}
	return nil
}

// verifyFile reads f, which holds m.Size bytes, in full and verifies
// them against m's digest: a member of one block directly, a larger one
// against its outboard ob, split into workers contiguous shares of whole
// chunks, hashed where they are in a shared read-only mapping of the file
// (no copy: a third less CPU per GB than pread into a buffer, measured by
// BenchmarkBacking256MiB). It returns
// nil if every byte is m's, an error wrapping b3.ErrMismatch if one is
// not, or the read's error (ctx's when it ends), and stops every worker
// at the first error. The bytes read are counted in r.st.backRead.
func (r *Reader) verifyFile(ctx context.Context, f *os.File, m *Member, ob []byte, workers int) error {
	if wholeMember(m) {
		b := make([]byte, m.Size)
		if _, err := f.ReadAt(b, 0); err != nil {
			return err
		}
		r.st.backRead.Add(m.Size)
		if b3.Of(b) != m.Digest {
			return fmt.Errorf("member of %d bytes: %w", m.Size, b3.ErrMismatch)
		}
		return nil
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(m.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	defer unix.Munmap(data)
	// Read ahead: the workers fault the pages in, each in order over its
	// share.
	_ = unix.Madvise(data, unix.MADV_SEQUENTIAL)
	chunks := (m.Size + verifyChunk - 1) / verifyChunk
	workers = int(min(int64(max(workers, 1)), chunks))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	fail := func(err error) {
		once.Do(func() { first = err })
		cancel()
	}
	for w := range int64(workers) {
		lo, hi := w*chunks/int64(workers), (w+1)*chunks/int64(workers)
		wg.Go(func() {
			// A file cut short under the mapping faults (SIGBUS): a
			// panic here, recovered as the read error it is.
			debug.SetPanicOnFault(true)
			defer func() {
				if p := recover(); p != nil {
					fail(fmt.Errorf("%s: read fault (the file changed while it was verified): %v", f.Name(), p))
				}
			}()
			end := min(hi*verifyChunk, m.Size)
			_ = unix.Madvise(data[lo*verifyChunk:min(lo*verifyChunk+verifyAhead, end)], unix.MADV_WILLNEED)
			for c := lo; c < hi; c++ {
				if err := ctx.Err(); err != nil {
					fail(err)
					return
				}
				off := c * verifyChunk
				if ahead := off + verifyAhead; ahead < end {
					// Keep the disk reading ahead in large requests while
					// this chunk is hashed: page faults alone read a
					// file cold from disk in small ones.
					_ = unix.Madvise(data[ahead:min(ahead+verifyChunk, end)], unix.MADV_WILLNEED)
				}
				b := data[off:min(off+verifyChunk, m.Size)]
				r.st.backRead.Add(int64(len(b)))
				if err := b3.Verify(m.Digest, ob, m.Size, off, b); err != nil {
					fail(fmt.Errorf("bytes %d+%d: %w", off, len(b), err))
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
