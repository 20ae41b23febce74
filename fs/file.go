package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/verify"
)

// SliceReader is a Reader that can hand out the verified bytes without a
// copy; Read then replies with them as they are (writev, no splice
// attempt, no copy into the reply buffer).
//
// Slices returns the bytes covering [off, off+n) of member i, in order,
// and their total, with ReadAt's EOF convention and errors. The bytes
// must stay valid and unmodified until Release, which Read calls once the
// reply is written (go-fuse's ReadResult.Done) or, on an error, at once.
// The Slices returned is never nil.
type SliceReader interface {
	Slices(ctx context.Context, i int, off int64, n int) (Slices, int, error)
}

// Slices is the bytes of one read held for its reply (store/blocks.Span).
type Slices interface {
	Vecs() [][]byte
	Release()
}

// heldReply is a reply of held Slices: go-fuse writes its vectors with
// writev (withSlice) and calls Done once the kernel has them, or once it
// gives up on the reply.
type heldReply struct {
	vecs [][]byte
	held Slices
}

func (r *heldReply) Slices() ([][]byte, fuse.Status) { return r.vecs, fuse.OK }
func (r *heldReply) Size() int                       { return vecLen(r.vecs) }
func (r *heldReply) Done()                           { r.held.Release() }

// Bytes concatenates the vectors into buf, for a path that cannot writev.
func (r *heldReply) Bytes(buf []byte) ([]byte, fuse.Status) {
	buf = buf[:0]
	for _, v := range r.vecs {
		buf = append(buf, v...)
	}
	return buf, fuse.OK
}

// file is a member of the snapshot. It holds only its member index; the
// Snapshot holds the rest.
type file struct {
	node
	i     int   // index in t.ms
	opens opens // counted only on a mount that may use passthrough
}

var (
	_ = (gofs.NodeGetattrer)((*file)(nil))
	_ = (gofs.NodeOpener)((*file)(nil))
	_ = (gofs.NodeReader)((*file)(nil))
	_ = (gofs.NodeAccesser)((*file)(nil))
	_ = (gofs.NodeStatfser)((*file)(nil))
)

// member returns the member the file serves, with all its fields.
func (f *file) member() *verify.Member {
	m := f.t.ms.Member(f.i)
	return &m
}

// fill sets the attributes of the file.
func (f *file) fill(a *fuse.Attr) {
	f.setCommon(a)
	a.Mode = syscall.S_IFREG | 0o444
	a.Nlink = 1
	a.Size = uint64(f.t.ms.Size(f.i))
	a.Blksize = blockSize
	a.Blocks = (a.Size + 511) / 512
}

// Getattr returns the file's attributes with the attribute timeout.
func (f *file) Getattr(ctx context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.fill(&out.Attr)
	out.SetTimeout(f.t.opts.AttrTimeout)
	return 0
}

// Open refuses any write access mode and O_TRUNC with EROFS. Otherwise it
// tells the Reader (when it is an Opener) and returns FOPEN_KEEP_CACHE:
// the content never changes, so the page cache outlives the open file;
// and FOPEN_NOFLUSH: there is nothing to flush, so close(2) does not wait
// for a FLUSH round trip (a cold small file costs LOOKUP, OPEN, READ and
// an asynchronous RELEASE). OPEN itself stays: it is how the run record
// learns of a member opened and never read (an empty one, say), which
// no_open would hide. On a mount with Options.Passthrough and a Reader
// that is a Backer, the open may instead be served from a backing file
// (openPassthrough).
func (f *file) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		return nil, 0, syscall.EROFS
	}
	if b, ok := f.t.r.(Backer); ok && f.t.opts.Passthrough != nil {
		return f.openPassthrough(ctx, b)
	}
	if o, ok := f.t.r.(Opener); ok {
		o.Opened(f.i)
	}
	return nil, fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_NOFLUSH, 0
}

// Read fills dest from offset off with the request's context, so that an
// interrupt cancels the Reader. A SliceReader's bytes go to the kernel as
// they are (ReadResultVector); other Readers fill dest. Errors go through
// Errno. The Reader must produce everything up to the member's size: a
// short read before the end would make the kernel shrink the file, so it
// is EIO.
func (f *file) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if _, ok := fh.(*passthroughHandle); ok {
		f.t.passthroughRefused()
	}
	size := f.t.ms.Size(f.i)
	if off < 0 {
		return nil, syscall.EINVAL
	}
	if off >= size {
		return fuse.ReadResultData(nil), 0
	}
	want := int(min(int64(len(dest)), size-off))
	var (
		res fuse.ReadResult
		n   int
		err error
	)
	if sr, ok := f.t.r.(SliceReader); ok {
		var sl Slices
		var got int
		sl, got, err = sr.Slices(ctx, f.i, off, want)
		vs := sl.Vecs()
		n = vecLen(vs)
		if n != got && err == nil {
			err = fmt.Errorf("slices hold %d bytes, the reader says %d", n, got)
		}
		if n != want || (err != nil && !errors.Is(err, io.EOF)) {
			sl.Release() // no reply carries them
		} else {
			res = &heldReply{vecs: vs, held: sl}
		}
	} else {
		p := dest[:want]
		n, err = f.t.r.ReadAt(ctx, f.i, p, off)
		res = fuse.ReadResultData(p)
	}
	if n == want && (err == nil || errors.Is(err, io.EOF)) {
		return res, 0
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = fmt.Errorf("%d of %d bytes: %w", n, want, io.ErrUnexpectedEOF)
	}
	return nil, Errno(err, f.t.log, fmt.Sprintf("read %s at %d", f.t.ms.Path(f.i), off))
}

// vecLen is the total length of vs.
func vecLen(vs [][]byte) int {
	n := 0
	for _, v := range vs {
		n += len(v)
	}
	return n
}

// Access refuses write access with EROFS and execution with EACCES (files
// are 0444), and allows reading.
func (f *file) Access(ctx context.Context, mask uint32) syscall.Errno {
	switch {
	case mask&unix.W_OK != 0:
		return syscall.EROFS
	case mask&unix.X_OK != 0:
		return syscall.EACCES
	}
	return 0
}
