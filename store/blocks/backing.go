package blocks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/verify/b3"
)

// ErrNoBacking: Backing has no verified file to hand over; the open is
// served through the Reader as usual. The error wraps why: fs.ErrNotExist
// for a plain miss, b3.ErrMismatch for a file that failed verification.
var ErrNoBacking = errors.New("blocks: no verified backing file")

// maxStamps bounds the stamps a Reader keeps: past it the least recently
// handed over member is verified again at its next open.
const maxStamps = 16384

// touchAge is how old a member file's modification time may be before
// Backing refreshes it, the disk tier's own age for whole-member files
// (cache.WholeTouchAge). A touch changes the file's ctime, and so its
// stamp: a file with a durable stamp is touched under a read lease, which
// carries the stamp over without a read (verifyBacking); any other is
// verified again after it (a cost once per touchAge, never per open), and
// every other mount that verified it does so at its next open too.
const touchAge = cache.WholeTouchAge

// stamp is what fstat says of a member file that may change without its
// bytes being read: a file whose stamp is the one recorded after its
// verification is handed over again without a read.
type stamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime unix.Timespec
}

func stampOf(st *unix.Stat_t) stamp {
	return stamp{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
}

// Backing returns m's whole-member file from the disk tier, opened
// read-only, once it is known to hold exactly m's bytes, for FUSE
// passthrough; or an error (ErrNoBacking wrapping why) and the open is
// served through the Reader as usual. The caller closes the file.
//
// The file must be a regular file owned by the daemon's effective user,
// mode 0400, of m's size, in a cache directory of mode 0700 owned by the
// same user; the checks are made on the open descriptor, which is what
// the kernel will read. A file that passes is handed over at once if its
// stamp (device, inode, size, mtime, ctime) is the one this Reader
// recorded when it last verified it, or if its durable stamp, which a
// mount of this boot left, says so (known); otherwise it is verified in
// full first (verifyBacking), and concurrent calls for one member share
// that verification, each waiting by its own ctx. A file that fails
// verification is removed (if its name still names it) and reported as a "mismatch" event From "disk";
// if the Reporter cannot record it, the error wraps ErrNotRecorded too,
// and the event is owed to the member's first block, whose next read
// fails until it is recorded.
func (r *Reader) Backing(ctx context.Context, m *Member) (*os.File, error) {
	if r.disk.Limit() == 0 {
		return nil, fmt.Errorf("%w: disk tier disabled: %w", ErrNoBacking, fs.ErrNotExist)
	}
	if !r.enter() {
		return nil, fmt.Errorf("%w: %w", ErrNoBacking, ErrClosed)
	}
	defer r.reads.Done()
	if err := checkDir(r.disk.Dir()); err != nil {
		r.st.backRefused.Add(1)
		return nil, err
	}
	p := r.disk.MemberPath(m.Digest)
	// O_NONBLOCK: opening a FIFO put there would otherwise wait for a
	// writer; it is cleared once the file is known to be a regular one.
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	switch {
	case err == unix.ENOENT:
		return nil, fmt.Errorf("%w: %s: %w", ErrNoBacking, p, fs.ErrNotExist)
	case err == unix.ELOOP:
		r.st.backRefused.Add(1)
		return nil, fmt.Errorf("%w: %s is a symbolic link", ErrNoBacking, p)
	case err != nil:
		r.st.backRefused.Add(1)
		return nil, fmt.Errorf("%w: open %s: %w", ErrNoBacking, p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	st, err := r.checkFile(f, m)
	if err == nil {
		_, err = unix.FcntlInt(f.Fd(), unix.F_SETFL, 0)
	}
	if err == nil {
		if !stale(st) && r.known(f, m, st) {
			r.st.backHanded.Add(1)
			return f, nil
		}
		err = r.verified(ctx, f, m)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	r.st.backHanded.Add(1)
	return f, nil
}

// stale reports whether a member file of stamp st is due for the touch
// that marks it recently used (touchAge).
func stale(st stamp) bool { return time.Since(time.Unix(st.mtime.Unix())) > touchAge }

// known reports whether f, m's member file of stamp st, is known to hold
// m's bytes without a read: its stamp is the one this Reader recorded, or
// the file's durable stamp says so (a verity stamp, or a ctime stamp of
// this boot: stamp.go), which it then records.
func (r *Reader) known(f *os.File, m *Member, st stamp) bool {
	if rec, ok := r.stamps.Get(m.Digest); ok && rec == st {
		return true
	}
	if r.durableKind(f, m, st) == noStamp {
		return false
	}
	r.stamps.Put(m.Digest, st)
	return true
}

// stampKind is the durable stamp a member file has.
type stampKind int

const (
	noStamp     stampKind = iota
	ctimeStamp            // its directory's trusted attribute (stamp.go)
	verityStamp           // a verity file's own (stampverity.go)
)

// durableKind returns the durable stamp that says f, m's member file of
// stamp st, holds m's bytes, if it has one.
func (r *Reader) durableKind(f *os.File, m *Member, st stamp) stampKind {
	switch {
	case verityStamped(f, m):
		return verityStamp
	case r.stampedDurably(m, st):
		return ctimeStamp
	}
	return noStamp
}

// Recheck returns nil when f, a member file Backing handed over for m
// earlier, still holds m's verified bytes: at once when its stamp is the
// one recorded or its durable stamp says so (known), else once it passed
// the checks and a verification again,
// as in Backing (a file that fails it is reported, and removed from the
// disk tier). The kernel reads an open's backing file itself, and every
// passthrough open of an inode shares the first one's file: a new open
// may use it only after this.
func (r *Reader) Recheck(ctx context.Context, m *Member, f *os.File) error {
	if !r.enter() {
		return fmt.Errorf("%w: %w", ErrNoBacking, ErrClosed)
	}
	defer r.reads.Done()
	st, err := r.checkFile(f, m)
	if err != nil {
		return err
	}
	if r.known(f, m, st) {
		return nil
	}
	return r.verified(ctx, f, m)
}

// checkDir checks that dir is a directory of mode 0700 owned by the
// daemon's effective user: then only that user (and root) can have put a
// file in it, so a file that is ours by its owner was written by pinfs or
// by someone who could write the daemon's memory as well.
func checkDir(dir string) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("%w: cache dir %s: %w", ErrNoBacking, dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o7777 != 0o700 || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: cache dir %s has mode %o and owner %d, want a directory of mode 700 owned by %d",
			ErrNoBacking, dir, st.Mode, st.Uid, os.Geteuid())
	}
	return nil
}

// checkFile checks, on f's descriptor, that f can be m's member file, and
// returns its stamp. A file that fails is not handed over. Only a file
// that the disk tier marks as complete (a regular file of ours, mode 0400)
// but that has the wrong size is removed, counted and reported as a
// mismatch: a file of another mode may be one the tier is still writing,
// and one of another owner or kind is not ours to remove.
func (r *Reader) checkFile(f *os.File, m *Member) (stamp, error) {
	st, err := fstat(f)
	if err != nil {
		r.st.backRefused.Add(1)
		return stamp{}, err
	}
	ours := st.Mode&unix.S_IFMT == unix.S_IFREG && int(st.Uid) == os.Geteuid()
	if !ours || st.Mode&0o7777 != 0o400 {
		r.st.backRefused.Add(1)
		return stamp{}, fmt.Errorf("%w: %s has mode %o and owner %d, want a regular file of mode 400 owned by %d",
			ErrNoBacking, f.Name(), st.Mode, st.Uid, os.Geteuid())
	}
	if st.Size != m.Size {
		err := fmt.Errorf("%w: %s has %d bytes, the member %d: %w", ErrNoBacking, f.Name(), st.Size, m.Size, b3.ErrMismatch)
		return stamp{}, r.damaged(f, m, err)
	}
	return stampOf(&st), nil
}

// fstat returns the status of f's descriptor (not of its name, which
// may have been replaced since the open).
func fstat(f *os.File) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return st, fmt.Errorf("%w: fstat %s: %w", ErrNoBacking, f.Name(), err)
	}
	return st, nil
}

// damaged removes m's member file f, which err says is not m's bytes,
// forgets its stamp, counts a mismatch and reports it for the whole
// member, and returns the error for Backing (wrapping ErrNotRecorded if
// the Reporter could not record it). f is removed only while the member
// file's name still names it: a file held by live opens may have been
// replaced there by another, which nothing has found wrong.
func (r *Reader) damaged(f *os.File, m *Member, err error) error {
	if r.named(f, m) {
		r.disk.RemoveMember(m.Digest)
		r.unstamp(m)
	}
	r.stamps.Remove(m.Digest)
	r.st.mismatches.Add(1)
	return r.report(Event{Kind: KindMismatch, Member: m, Off: 0, Len: m.Size, From: FromDisk, Err: err}, err)
}

// named reports whether m's member file name names f, or cannot tell.
func (r *Reader) named(f *os.File, m *Member) bool {
	var fst, pst unix.Stat_t
	if unix.Fstat(int(f.Fd()), &fst) != nil || unix.Lstat(r.disk.MemberPath(m.Digest), &pst) != nil {
		return true
	}
	return fst.Dev == pst.Dev && fst.Ino == pst.Ino
}

// verified verifies f, m's member file, in full, or joins the
// verification of m's file already running, and returns nil once f's
// current stamp is the one recorded by that verification. The
// verification runs on a duplicate of f's descriptor and the Reader's
// context, so that a caller whose ctx ends returns at once while it goes
// on for the others; Close cancels it.
func (r *Reader) verified(ctx context.Context, f *os.File, m *Member) error {
	c, own := r.backs.Start(m.Digest)
	if own {
		fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		r.mu.Lock()
		closed := r.closed
		if err == nil && !closed {
			r.wg.Add(1)
		}
		r.mu.Unlock()
		switch {
		case err != nil:
			err = fmt.Errorf("%w: dup %s: %w", ErrNoBacking, f.Name(), err)
		case closed:
			unix.Close(fd)
			err = fmt.Errorf("%w: %w", ErrNoBacking, ErrClosed)
		}
		if err != nil {
			c.Set(stamp{}, err)
			r.backs.Forget(m.Digest, c)
			return err
		}
		mc := *m // the caller's may change
		go func() {
			defer r.wg.Done()
			g := os.NewFile(uintptr(fd), f.Name())
			defer g.Close()
			st, err := r.verifyBacking(r.ctx, g, &mc)
			// Forgotten before it ends: a caller woken by the end may
			// change the file and ask again at once, and must then get
			// a verification of its own, not this one's stamp.
			r.backs.Forget(mc.Digest, c)
			c.Set(st, err)
		}()
	}
	rec, err := c.Wait(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrNoBacking, ctx.Err())
		}
		return err
	}
	st, err := fstat(f)
	if err != nil {
		return err
	}
	if stampOf(&st) != rec {
		// Another file took the name after the verification opened it
		// (or before it, for a caller that joined): the next open
		// verifies the file then there.
		return fmt.Errorf("%w: %s is not the file just verified", ErrNoBacking, f.Name())
	}
	return nil
}
