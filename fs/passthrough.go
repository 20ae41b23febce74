package fs

import (
	"context"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Passthrough is a mount's switch for FUSE passthrough and its counters.
// Give one to NewRoot in Options.Passthrough to let the tree offer backing
// files when its Reader is a Backer. It starts off: a mount serves before
// Probe has said whether the kernel takes backing files, and the open path
// offers none until it has. It is safe for concurrent use.
type Passthrough struct {
	on      atomic.Bool
	reason  atomic.Pointer[string]
	opens   atomic.Int64
	bytes   atomic.Int64
	refused atomic.Bool // the kernel read through the daemon for a passthrough open
}

// PassthroughStatus is what a mount reports of its passthrough opens.
type PassthroughStatus struct {
	Enabled bool
	Reason  string // why it is off; "" while on, or before Probe decided
	Opens   int64  // opens served from a backing file
	Bytes   int64  // sum of the sizes of the members of those opens
}

// Status returns the switch and the counters.
func (p *Passthrough) Status() PassthroughStatus {
	s := PassthroughStatus{Enabled: p.on.Load(), Opens: p.opens.Load(), Bytes: p.bytes.Load()}
	if r := p.reason.Load(); r != nil && !s.Enabled {
		s.Reason = *r
	}
	return s
}

// Off turns passthrough off for the reason given. Opens of backing files
// still live stay as they are; new opens are served through the Reader.
func (p *Passthrough) Off(reason string) {
	p.reason.Store(&reason)
	p.on.Store(false)
}

// enabled reports whether opens may be offered backing files now.
func (p *Passthrough) enabled() bool { return p != nil && p.on.Load() }

// counted notes one open served from a backing file of a member of size bytes.
func (p *Passthrough) counted(size int64) {
	p.opens.Add(1)
	p.bytes.Add(size)
}

// passthroughRefused is called for a READ of a passthrough open, which
// the kernel never sends when it took the backing file: go-fuse failed to
// register it and so turned backing files off for the whole mount without
// a word. It turns the switch off too, so that status says so and new
// files are served as cached opens, and logs it once.
func (t *tree) passthroughRefused() {
	p := t.opts.Passthrough
	if p.refused.Swap(true) {
		return
	}
	p.Off(ReasonRefused)
	t.log.Info("passthrough off", "reason", ReasonRefused)
}

// backingWait bounds how long an open waits for Backing or Recheck, which
// may verify a whole member file: past it Backing's open is served through
// the Reader (the verification goes on, for the next open) and Recheck's
// fails with EIO.
const backingWait = time.Minute

// backingLinger is how long a node's backing file stays open after its
// last passthrough open is released. go-fuse lets go of the inode's
// backing id only after Release returns, and an open in between is handed
// that id, so the kernel reads the old file whatever file the open was
// given: an open in that time must be given the old file, rechecked.
// go-fuse's step is a lock and a map update; a second is ample, and
// bounds what an evicted file's space is held after its last open.
var backingLinger = time.Second

// opens is a file node's live opens. The kernel refuses (EIO) an open in
// passthrough mode of an inode that has a cached open live, and the other
// way round (fs/fuse/iomode.c), so every open of a node takes the mode of
// the opens already live, and only an open with none live may choose.
//
// The counts lag the kernel's own, never lead them: an open is counted
// before its reply reaches the kernel, and uncounted at RELEASE, which the
// kernel sends after it let go of the file. mu guards them and backing,
// the node's backing file while a passthrough open lives, and for
// backingLinger after: go-fuse asks for a descriptor only for the first
// open of an inode with no backing id, and every passthrough handle must
// be able to give one then. gen counts the releases of the last
// passthrough open, so that a linger timer closes only the file of its
// own release.
type opens struct {
	mu      nodeLock
	pt      int32
	cached  int32
	backing *os.File
	gen     uint64
}

// nodeLock is the mutex of a node's opens, whose lockCtx gives up when a
// ctx ends: an open holds it while Backing verifies a member file, which
// can take a minute for a large one, and another open of the node waiting
// for it must still return when the kernel interrupts it. The zero value
// is unlocked, and as small as a sync.Mutex: a tree has a node per member.
type nodeLock struct {
	c atomic.Pointer[chan struct{}] // made at first use
}

func (l *nodeLock) ch() chan struct{} {
	if c := l.c.Load(); c != nil {
		return *c
	}
	c := make(chan struct{}, 1)
	if !l.c.CompareAndSwap(nil, &c) {
		return *l.c.Load()
	}
	return c
}

// Lock locks l.
func (l *nodeLock) Lock() { l.ch() <- struct{}{} }

// Unlock unlocks l, which must be locked.
func (l *nodeLock) Unlock() { <-l.ch() }

// lockCtx locks l, or returns ctx's error if ctx ends first.
func (l *nodeLock) lockCtx(ctx context.Context) error {
	select {
	case l.ch() <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// openPassthrough is Open on a mount that may serve the file through
// passthrough: it returns a passthrough handle when passthrough opens of
// the node are live, or none are and the switch is on and the Backer has a
// backing file; else a cached handle. Both count the open until release.
//
// A new open of a node whose passthrough opens are live shares their
// backing file (go-fuse registers one per inode), which the kernel reads
// without the daemon: it is rechecked first, and if it no longer holds
// the verified bytes (it was written to in place) the open fails with
// EIO. It cannot be served through the Reader instead: the kernel refuses
// any other open of an inode with a backing file. Within backingLinger of
// the last one's release the backing file is rechecked and shared the
// same way (go-fuse may still hold it for the inode), but one that fails
// gives a cached open: the kernel holds no open of the inode then. An
// open waiting for another open of the node (a verification) returns
// EINTR when its ctx ends.
func (f *file) openPassthrough(ctx context.Context, b Backer) (gofs.FileHandle, uint32, syscall.Errno) {
	t := f.t
	if err := f.opens.mu.lockCtx(ctx); err != nil {
		return nil, 0, syscall.EINTR
	}
	defer f.opens.mu.Unlock()
	if f.opens.pt == 0 && (f.opens.cached > 0 || !t.opts.Passthrough.enabled()) {
		return f.openCached(), fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_NOFLUSH, 0
	}
	// The open waits for the verification even when the kernel
	// interrupts it: any signal to the opening thread does (a child's
	// SIGCHLD, the Go runtime's preemption), and served as a cached
	// open it would keep every open of the member off passthrough while
	// it lives. A fatal signal ends the wait in the kernel all the same.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backingWait)
	defer cancel()
	if f.opens.backing == nil {
		bf, ok := b.Backing(ctx, f.i)
		if !ok {
			return f.openCached(), fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_NOFLUSH, 0
		}
		f.opens.backing = bf
	} else if !b.Recheck(ctx, f.i, f.opens.backing) {
		if f.opens.pt == 0 {
			return f.openCached(), fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_NOFLUSH, 0
		}
		t.log.Error("refusing an open: the backing file of the opens still live no longer holds the verified bytes; new opens fail until they close",
			"path", t.ms.Path(f.i), "file", f.opens.backing.Name())
		return nil, 0, syscall.EIO
	}
	f.opens.pt++
	b.PassedThrough(f.i)
	t.opts.Passthrough.counted(t.ms.Size(f.i))
	// go-fuse drops FOPEN_KEEP_CACHE of a passthrough open itself: the
	// kernel reads the backing file's page cache, not the mount's.
	return &passthroughHandle{f: f, backing: f.opens.backing}, fuse.FOPEN_NOFLUSH, 0
}

// openCached counts a cached open; f.opens.mu is held.
func (f *file) openCached() gofs.FileHandle {
	if o, ok := f.t.r.(Opener); ok {
		o.Opened(f.i)
	}
	f.opens.cached++
	return &cachedHandle{f: f}
}

// cachedHandle is an open served through the Reader on a mount that may
// use passthrough; it exists to be uncounted at release.
type cachedHandle struct{ f *file }

var _ = (gofs.FileReleaser)((*cachedHandle)(nil))

// Release uncounts the open.
func (h *cachedHandle) Release(ctx context.Context) syscall.Errno {
	o := &h.f.opens
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cached--
	return 0
}

// passthroughHandle is an open the kernel serves from the node's backing
// file. Should go-fuse fail to register the file (it then turns backing
// files off for the whole mount) the open is a cached one in the kernel,
// served by Read; the counts stay consistent because every later open of
// the node is offered passthrough too, and refused it the same way.
type passthroughHandle struct {
	f       *file
	backing *os.File
}

var (
	_ = (gofs.FilePassthroughFder)((*passthroughHandle)(nil))
	_ = (gofs.FileReleaser)((*passthroughHandle)(nil))
)

// PassthroughFd returns the backing file's descriptor, for go-fuse to
// register with the kernel.
func (h *passthroughHandle) PassthroughFd() (int, bool) { return int(h.backing.Fd()), true }

// Release uncounts the open and closes the backing file backingLinger
// after the node's last passthrough open, unless an open took it again
// meanwhile. The kernel holds its own reference to a registered file, so
// this never pulls it from under a reader.
func (h *passthroughHandle) Release(ctx context.Context) syscall.Errno {
	o := &h.f.opens
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pt--
	if o.pt == 0 {
		o.gen++
		gen := o.gen
		time.AfterFunc(backingLinger, func() { h.f.closeBacking(gen) })
	}
	return 0
}

// closeBacking closes the node's backing file if no open took it since
// the release that made gen.
func (f *file) closeBacking(gen uint64) {
	o := &f.opens
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.pt != 0 || o.gen != gen || o.backing == nil {
		return
	}
	if err := o.backing.Close(); err != nil {
		f.t.log.Warn("closing a backing file", "path", f.t.ms.Path(f.i), "err", err)
	}
	o.backing = nil
}
