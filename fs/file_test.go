package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/b3"
)

// fileOf returns the file node at path p and its member index.
func fileOf(t testing.TB, root *rootDir, p string) *file {
	t.Helper()
	n := nodes(root.EmbeddedInode())[p]
	if n == nil {
		t.Fatalf("no node %q", p)
	}
	return n.Operations().(*file)
}

func TestOpen(t *testing.T) {
	snap, data := snapshot(t, fixture)
	r := &memReader{data: data}
	root := build(t, snap, r, testOptions())
	f := fileOf(t, root, "a/y/z.bin")
	for _, c := range []struct {
		flags uint32
		want  syscall.Errno
	}{
		{syscall.O_RDONLY, 0},
		{syscall.O_RDONLY | syscall.O_NONBLOCK | syscall.O_CLOEXEC, 0},
		{syscall.O_WRONLY, syscall.EROFS},
		{syscall.O_RDWR, syscall.EROFS},
		{syscall.O_RDONLY | syscall.O_TRUNC, syscall.EROFS},
		{syscall.O_WRONLY | syscall.O_APPEND, syscall.EROFS},
	} {
		fh, flags, e := f.Open(context.Background(), c.flags)
		if e != c.want || fh != nil {
			t.Errorf("Open(%#o) = %v, %v, want %v", c.flags, fh, e, c.want)
		}
		if want := uint32(fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_NOFLUSH); e == 0 && flags&want != want {
			t.Errorf("Open(%#o) flags %#x lack FOPEN_KEEP_CACHE or FOPEN_NOFLUSH", c.flags, flags)
		}
	}
	if n := r.openCount(f.i); n != 2 {
		t.Errorf("Opened called %d times, want 2 (once per successful open)", n)
	}
}

// read calls Read and returns the bytes it produced.
func read(t testing.TB, ctx context.Context, f *file, n int, off int64) ([]byte, syscall.Errno) {
	t.Helper()
	res, e := f.Read(ctx, nil, make([]byte, n), off)
	if e != 0 {
		return nil, e
	}
	b, st := res.Bytes(make([]byte, n))
	if !st.Ok() {
		t.Fatalf("ReadResult.Bytes: %v", st)
	}
	return b, 0
}

func TestRead(t *testing.T) {
	snap, data := snapshot(t, fixture)
	root := build(t, snap, &memReader{data: data}, testOptions())
	f := fileOf(t, root, "train/part-000.jsonl")
	want := data[f.i]
	size := int64(len(want))
	for _, c := range []struct {
		n   int
		off int64
	}{
		{4096, 0}, {1, 0}, {4097, 1}, {65536, 65535}, {131072, 65537}, {7, size - 3},
		{4096, size - 1}, {4096, size}, {4096, size + 100}, {1 << 20, 0},
	} {
		got, e := read(t, context.Background(), f, c.n, c.off)
		if e != 0 {
			t.Fatalf("Read(%d@%d) = %v", c.n, c.off, e)
		}
		start := min(c.off, size)
		end := min(c.off+int64(c.n), size)
		if !bytes.Equal(got, want[start:end]) {
			t.Errorf("Read(%d@%d): %d bytes differ from the member's", c.n, c.off, len(got))
		}
	}
	empty := fileOf(t, root, "train/part-001.jsonl")
	if got, e := read(t, context.Background(), empty, 10, 0); e != 0 || len(got) != 0 {
		t.Errorf("Read of an empty member = %q, %v", got, e)
	}
}

func TestReadErrors(t *testing.T) {
	snap, data := snapshot(t, fixture)
	var logs bytes.Buffer
	o := testOptions()
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := &memReader{data: data, fail: map[int]error{}, short: map[int]bool{}}
	root := build(t, snap, r, o)
	f := fileOf(t, root, "val/part-000.jsonl")
	for _, c := range []struct {
		name  string
		err   error
		short bool
		want  syscall.Errno
	}{
		{"access denied", fmt.Errorf("get s3://bucket/key: %w", store.ErrAccessDenied), false, syscall.EACCES},
		{"mismatch", mismatchErr(t, snap.Table().Member(f.i), data[f.i]), false, syscall.EIO},
		{"version gone", fmt.Errorf("get: %w", store.ErrNotFound), false, syscall.EIO},
		{"unexpected EOF", io.ErrUnexpectedEOF, false, syscall.EIO},
		{"short read without error", nil, true, syscall.EIO},
	} {
		logs.Reset()
		r.fail[f.i], r.short[f.i] = c.err, c.short
		if _, e := read(t, context.Background(), f, 4096, 100); e != c.want {
			t.Errorf("%s: Read = %v, want %v", c.name, e, c.want)
		}
		if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), "val/part-000.jsonl") {
			t.Errorf("%s: want one log line naming the member, got %q", c.name, logs.String())
		}
		if integrity := strings.Contains(logs.String(), "integrity failure"); integrity != errors.Is(c.err, b3.ErrMismatch) {
			t.Errorf("%s: logged as an integrity failure: %v, want %v: %q", c.name, integrity, !integrity, logs.String())
		}
	}

	// A Reader that waits for its context: the kernel's interrupt cancels it.
	r.block = true
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, e := read(t, ctx, f, 4096, 0); e != syscall.EINTR {
		t.Errorf("interrupted Read = %v, want EINTR", e)
	}
}

func TestAccess(t *testing.T) {
	snap, data := snapshot(t, fixture)
	root := build(t, snap, &memReader{data: data}, testOptions())
	f := fileOf(t, root, "a.b")
	for _, c := range []struct {
		n    gofs.NodeAccesser
		mask uint32
		want syscall.Errno
	}{
		{f, unix.R_OK, 0}, {f, unix.W_OK, syscall.EROFS}, {f, unix.X_OK, syscall.EACCES}, {f, unix.F_OK, 0},
		{root, unix.R_OK | unix.X_OK, 0}, {root, unix.W_OK | unix.X_OK, syscall.EROFS},
	} {
		if e := c.n.Access(context.Background(), c.mask); e != c.want {
			t.Errorf("%T.Access(%#o) = %v, want %v", c.n, c.mask, e, c.want)
		}
	}
}

// sliceReader is a memReader that is also a SliceReader: it hands out
// sub-slices of the member's bytes cut every cut bytes, the way the block
// reader hands out its cached blocks. lie makes it report one byte more
// than its slices hold.
type sliceReader struct {
	*memReader
	cut int
	lie bool

	mu       sync.Mutex
	calls    int
	released int
}

var _ SliceReader = (*sliceReader)(nil)

// heldVecs is the Slices of a sliceReader: it counts its releases.
type heldVecs struct {
	r    *sliceReader
	vs   [][]byte
	done bool
}

func (h *heldVecs) Vecs() [][]byte { return h.vs }
func (h *heldVecs) Release() {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	if h.done {
		panic("Slices released twice")
	}
	h.done = true
	h.r.released++
}

func (r *sliceReader) Slices(ctx context.Context, i int, off int64, n int) (Slices, int, error) {
	sl, got, err := r.slices(i, off, n)
	h := &heldVecs{r: r, vs: sl}
	return h, got, err
}

// unreleased returns the Slices handed out and not released.
func (r *sliceReader) unreleased() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls - r.released
}

func (r *sliceReader) slices(i int, off int64, n int) ([][]byte, int, error) {
	r.mu.Lock()
	r.calls++
	r.mu.Unlock()
	if err := r.fail[i]; err != nil {
		return nil, 0, err
	}
	b := r.data[i]
	if off >= int64(len(b)) {
		return nil, 0, io.EOF
	}
	end := min(off+int64(n), int64(len(b)))
	var vs [][]byte
	for p := off; p < end; {
		q := min((p/int64(r.cut)+1)*int64(r.cut), end)
		vs = append(vs, b[p:q])
		p = q
	}
	got := int(end - off)
	if r.lie {
		got++
	}
	if got < n {
		return vs, got, io.EOF
	}
	return vs, got, nil
}

func (r *sliceReader) callCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// vectored is what go-fuse's ReadResultVector has and ReadResultData has not.
type vectored interface {
	Slices() ([][]byte, fuse.Status)
}

func TestReadSlices(t *testing.T) {
	snap, data := snapshot(t, fixture)
	r := &sliceReader{memReader: &memReader{data: data, fail: map[int]error{}}, cut: 65536}
	root := build(t, snap, r, testOptions())
	f := fileOf(t, root, "train/part-000.jsonl")
	want := data[f.i]
	size := int64(len(want))
	for _, c := range []struct {
		n   int
		off int64
	}{{4096, 0}, {131072, 65537}, {1 << 20, 0}, {4096, size - 1}, {7, size - 3}} {
		res, e := f.Read(context.Background(), nil, make([]byte, c.n), c.off)
		if e != 0 {
			t.Fatalf("Read(%d@%d) = %v", c.n, c.off, e)
		}
		v, ok := res.(vectored)
		if !ok {
			t.Fatalf("Read(%d@%d) of a SliceReader replied with %T, want a vector", c.n, c.off, res)
		}
		vs, _ := v.Slices()
		end := min(c.off+int64(c.n), size)
		if got := bytes.Join(vs, nil); !bytes.Equal(got, want[c.off:end]) {
			t.Errorf("Read(%d@%d): %d bytes differ from the member's", c.n, c.off, len(got))
		}
		if res.Size() != int(end-c.off) {
			t.Errorf("Read(%d@%d): reply size %d, want %d", c.n, c.off, res.Size(), end-c.off)
		}
		// The reply holds the bytes until go-fuse is done with it.
		if r.unreleased() != 1 {
			t.Errorf("Read(%d@%d): %d Slices held before the reply is done, want 1", c.n, c.off, r.unreleased())
		}
		res.Done()
		if r.unreleased() != 0 {
			t.Errorf("Read(%d@%d): the reply's Done left %d Slices held", c.n, c.off, r.unreleased())
		}
	}
	if r.callCount() == 0 {
		t.Error("Slices never called")
	}

	// Plain Readers still reply with the data they filled in.
	plain := build(t, snap, &memReader{data: data}, testOptions())
	res, e := fileOf(t, plain, "train/part-000.jsonl").Read(context.Background(), nil, make([]byte, 4096), 0)
	if _, ok := res.(vectored); e != 0 || ok {
		t.Errorf("Read of a plain Reader = %T, %v, want data", res, e)
	}

	// Errors map as for ReadAt; a reader whose total is not what its
	// slices hold is EIO, never a reply of the wrong size.
	r.fail[f.i] = fmt.Errorf("get: %w", store.ErrAccessDenied)
	if _, e := f.Read(context.Background(), nil, make([]byte, 4096), 0); e != syscall.EACCES {
		t.Errorf("failing SliceReader: Read = %v, want EACCES", e)
	}
	delete(r.fail, f.i)
	r.lie = true
	if _, e := f.Read(context.Background(), nil, make([]byte, 4096), 0); e != syscall.EIO {
		t.Errorf("lying SliceReader: Read = %v, want EIO", e)
	}
	// A read that fails replies with nothing and holds nothing.
	if n := r.unreleased(); n != 0 {
		t.Errorf("failed reads left %d Slices held", n)
	}
}
