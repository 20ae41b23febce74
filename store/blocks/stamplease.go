package blocks

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// maxSettle bounds how long settled waits for the clock to pass a file's
// ctime: one tick of the coarse clock, or a second on a file system that
// keeps whole seconds; more means the clock was set back, and the stamp is
// not made durable.
const maxSettle = 1500 * time.Millisecond

// freeze is a read lease (F_SETLEASE F_RDLCK) on a member file's open
// file description, held while verifyBacking reads the file and decides
// its stamp. The kernel grants it only while no one has the file open for
// writing (a writable mapping holds its open), and breaks it when anyone
// opens it for writing or truncates it meanwhile (the writer waits for
// the release, up to /proc/sys/fs/lease-break-time). So while it holds,
// the file's bytes do not change by any path, and there is no writable
// mapping made before it (whose writes to a page already dirty would set
// no time). The break's signal, SIGIO, is one the Go runtime ignores.
type freeze struct {
	fd     uintptr
	ok     bool // the lease was granted
	writer bool // refused: someone has the file open for writing
}

// freezeFile takes a read lease on f (ok false when the kernel refuses
// it: a writer has the file open (writer), the file system has no leases,
// or we are not the file's owner and lack CAP_LEASE).
func freezeFile(f *os.File) freeze {
	fd := f.Fd()
	_, err := unix.FcntlInt(fd, unix.F_SETLEASE, unix.F_RDLCK)
	return freeze{fd: fd, ok: err == nil, writer: err == unix.EAGAIN}
}

// holds reports whether the lease is still whole: no one opened the file
// for writing or truncated it since it was granted (a lease being broken
// reads as F_UNLCK, as does one the kernel took back).
func (z freeze) holds() bool {
	if !z.ok {
		return false
	}
	t, err := unix.FcntlInt(z.fd, unix.F_GETLEASE, 0)
	return err == nil && t == unix.F_RDLCK
}

// release gives the lease up.
func (z freeze) release() {
	if z.ok {
		unix.FcntlInt(z.fd, unix.F_SETLEASE, unix.F_UNLCK)
	}
}

// settled waits until any change of the file after now would set a ctime
// other than c, the file's ctime, and then reports whether the lease held
// throughout: the file's bytes are then those it had at ctime c, and
// every later change of them moves its ctime. A change sets the ctime to
// the coarse clock (or, once a ctime was read, a finer one), truncated to
// the file system's granularity: a change within c's tick would keep c.
// So it waits until the coarse clock is past c, or past c's second when c
// has no nanoseconds (a file system of whole seconds). It returns false
// when that would take longer than maxSettle or ctx ends.
func (z freeze) settled(ctx context.Context, c unix.Timespec) bool {
	if !z.ok {
		return false
	}
	need := c.Nano()
	if c.Nsec == 0 {
		need = (c.Sec + 1) * 1e9
	} else {
		need++
	}
	deadline := time.Now().Add(maxSettle)
	for {
		var now unix.Timespec
		if unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &now) != nil {
			return false
		}
		if now.Nano() >= need {
			return z.holds()
		}
		if need-now.Nano() > int64(maxSettle) || time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}
