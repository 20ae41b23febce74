package blocks

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/store/cache"
	"github.com/pinfs/pinfs/verify/b3"
)

// backingEnv is an env with a Reader over a disk tier in a fresh 0700
// directory.
type backingEnv struct {
	*env
	disk *cache.Disk
	r    *Reader
}

func newBackingEnv(t *testing.T) *backingEnv {
	t.Helper()
	e := newEnv(t)
	d := diskDir(t, filepath.Join(t.TempDir(), "cache"), 1<<30)
	t.Cleanup(func() { d.Close() })
	return &backingEnv{env: e, disk: d, r: e.reader(Config{Disk: d})}
}

// put writes data as m's member file, mode 0400, as the disk tier would,
// and returns its path.
func (e *backingEnv) put(m *Member, data []byte) string {
	e.t.Helper()
	p := e.disk.MemberPath(m.Digest)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o400); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chmod(p, 0o400); err != nil { // whatever the umask
		e.t.Fatal(err)
	}
	return p
}

// handOver calls Backing, which must hand over a file holding exactly m's
// bytes, and closes it.
func (e *backingEnv) handOver(m *Member) {
	e.t.Helper()
	f, err := e.r.Backing(context.Background(), m)
	if err != nil {
		e.t.Fatalf("Backing(%s): %v", m.Path, err)
	}
	defer f.Close()
	if fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 {
		e.t.Fatalf("Backing(%s): file flags %#x (%v), want O_NONBLOCK cleared", m.Path, fl, err)
	}
	got, err := io.ReadAll(f)
	if err != nil {
		e.t.Fatal(err)
	}
	if !bytes.Equal(got, e.data[m.Digest]) {
		e.t.Fatalf("Backing(%s): the file's bytes differ from the member's", m.Path)
	}
}

func TestBackingHandsOverOnceVerified(t *testing.T) {
	// Members of one block (by digest alone), of several chunks and of a
	// last chunk cut short, so that every worker has a share.
	for _, size := range []int64{1000, BlockSize, 2*verifyChunk + 3*BlockSize + 123} {
		e := newBackingEnv(t)
		m := e.member(size)
		e.put(m, e.data[m.Digest])
		e.handOver(m)
		s := e.r.Stats()
		if s.PassthroughVerified != 1 || s.PassthroughBytesVerified != size || s.PassthroughBytesRead != size {
			t.Fatalf("size %d: after the first hand-over %d verified, %d bytes verified, %d read; want 1, %d, %d",
				size, s.PassthroughVerified, s.PassthroughBytesVerified, s.PassthroughBytesRead, size, size)
		}
		e.handOver(m)
		s = e.r.Stats()
		if s.PassthroughVerified != 1 || s.PassthroughBytesRead != size || s.PassthroughHanded != 2 {
			t.Fatalf("size %d: the second hand-over read the file again (%d verified, %d bytes read, %d handed)",
				size, s.PassthroughVerified, s.PassthroughBytesRead, s.PassthroughHanded)
		}
		if n := len(e.store.requests()); n != 0 {
			t.Fatalf("size %d: %d store requests", size, n)
		}
	}
}

func TestBackingMiss(t *testing.T) {
	e := newBackingEnv(t)
	m := e.member(3 * BlockSize)
	if _, err := e.r.Backing(context.Background(), m); !errors.Is(err, ErrNoBacking) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no member file: %v, want ErrNoBacking wrapping fs.ErrNotExist", err)
	}
	off := newEnv(t).reader(Config{})
	if _, err := off.Backing(context.Background(), m); !errors.Is(err, ErrNoBacking) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no disk tier: %v, want ErrNoBacking wrapping fs.ErrNotExist", err)
	}
	if s := e.r.Stats(); s.PassthroughRefused != 0 || s.Mismatches != 0 {
		t.Fatalf("a miss counted as refused (%d) or mismatch (%d)", s.PassthroughRefused, s.Mismatches)
	}
}

// TestBackingChangedFile changes a verified file's bytes and puts its
// mtime back: only its ctime says it changed, and that is enough.
func TestBackingChangedFile(t *testing.T) {
	e := newBackingEnv(t)
	m := e.member(3*BlockSize + 5)
	p := e.put(m, e.data[m.Digest])
	e.handOver(m)
	info, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(e.data[m.Digest])
	bad[2*BlockSize+7] ^= 1
	os.Chmod(p, 0o600)
	if err := os.WriteFile(p, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o400)
	if err := os.Chtimes(p, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	_, err = e.r.Backing(context.Background(), m)
	if !errors.Is(err, ErrNoBacking) || !errors.Is(err, b3.ErrMismatch) {
		t.Fatalf("changed file: %v, want ErrNoBacking wrapping b3.ErrMismatch", err)
	}
	if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the damaged file is still there (%v)", err)
	}
	evs := e.rec.all()
	if len(evs) != 1 || evs[0].Kind != KindMismatch || evs[0].From != FromDisk || evs[0].Off != 0 || evs[0].Len != m.Size {
		t.Fatalf("events %+v, want one mismatch From disk over the whole member", evs)
	}
	if s := e.r.Stats(); s.Mismatches != 1 || s.PassthroughVerified != 1 || s.PassthroughBytesRead != 2*m.Size {
		t.Fatalf("%d mismatches, %d verified, %d bytes read; want 1, 1, %d", s.Mismatches, s.PassthroughVerified, s.PassthroughBytesRead, 2*m.Size)
	}
	// The open falls back to the Reader, which serves the right bytes.
	e.readAll(e.r, m, 1<<17)
}

func TestBackingRefused(t *testing.T) {
	cases := []struct {
		name    string
		damage  func(e *backingEnv, m *Member, p string)
		removed bool // the file goes, as a mismatch
	}{
		{"symlink", func(e *backingEnv, m *Member, p string) {
			real := p + ".real"
			os.Rename(p, real)
			if err := os.Symlink(real, p); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"mode 0600", func(e *backingEnv, m *Member, p string) { os.Chmod(p, 0o600) }, false},
		{"mode 0444", func(e *backingEnv, m *Member, p string) { os.Chmod(p, 0o444) }, false},
		{"mode 04400", func(e *backingEnv, m *Member, p string) { os.Chmod(p, 0o400|os.ModeSetuid) }, false},
		{"directory", func(e *backingEnv, m *Member, p string) { os.Remove(p); os.Mkdir(p, 0o400) }, false},
		{"fifo", func(e *backingEnv, m *Member, p string) { os.Remove(p); unix.Mkfifo(p, 0o400) }, false},
		{"other owner", func(e *backingEnv, m *Member, p string) {
			if os.Geteuid() != 0 {
				t.Skip("chown needs root")
			}
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"dir mode 0755", func(e *backingEnv, m *Member, p string) { os.Chmod(e.disk.Dir(), 0o755) }, false},
		{"short", func(e *backingEnv, m *Member, p string) { os.Truncate(p, m.Size-1) }, true},
		{"long", func(e *backingEnv, m *Member, p string) {
			os.Chmod(p, 0o600)
			os.WriteFile(p, append(bytes.Clone(e.data[m.Digest]), 0), 0o600)
			os.Chmod(p, 0o400)
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newBackingEnv(t)
			m := e.member(2*BlockSize + 9)
			p := e.put(m, e.data[m.Digest])
			c.damage(e, m, p)
			f, err := e.r.Backing(context.Background(), m)
			if err == nil {
				f.Close()
				t.Fatal("handed over")
			}
			if !errors.Is(err, ErrNoBacking) {
				t.Fatalf("%v, want ErrNoBacking", err)
			}
			s := e.r.Stats()
			if s.PassthroughBytesRead != 0 || s.PassthroughHanded != 0 {
				t.Fatalf("%d bytes read, %d handed over before the checks refused it", s.PassthroughBytesRead, s.PassthroughHanded)
			}
			_, lerr := os.Lstat(p)
			if gone := errors.Is(lerr, fs.ErrNotExist); gone != c.removed {
				t.Fatalf("removed %v, want %v (%v)", gone, c.removed, err)
			}
			evs := e.rec.all()
			if c.removed {
				if s.Mismatches != 1 || len(evs) != 1 || evs[0].From != FromDisk || !errors.Is(err, b3.ErrMismatch) {
					t.Fatalf("%d mismatches, events %+v, err %v; want one mismatch From disk", s.Mismatches, evs, err)
				}
			} else if s.PassthroughRefused != 1 || s.Mismatches != 0 || len(evs) != 0 {
				t.Fatalf("%d refused, %d mismatches, %d events; want 1, 0, 0", s.PassthroughRefused, s.Mismatches, len(evs))
			}
		})
	}
}

// TestBackingShared: concurrent opens of a member share one verification,
// held open here by a slow outboard load.
func TestBackingShared(t *testing.T) {
	e := newBackingEnv(t)
	m := e.member(3 * BlockSize)
	e.put(m, e.data[m.Digest])
	release := make(chan struct{})
	e.obs.Fail = func() error { <-release; return nil }
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			f, err := e.r.Backing(context.Background(), m)
			if err != nil {
				t.Error(err)
				return
			}
			f.Close()
		})
	}
	time.Sleep(100 * time.Millisecond)
	close(release)
	wg.Wait()
	if s := e.r.Stats(); s.PassthroughVerified != 1 || s.PassthroughHanded != 8 {
		t.Fatalf("%d verifications, %d hand-overs; want 1, 8", s.PassthroughVerified, s.PassthroughHanded)
	}
}

// TestBackingCanceled: a caller whose ctx ends stops waiting; the
// verification goes on and serves the next caller.
func TestBackingCanceled(t *testing.T) {
	e := newBackingEnv(t)
	m := e.member(3 * BlockSize)
	e.put(m, e.data[m.Digest])
	release := make(chan struct{})
	e.obs.Fail = func() error { <-release; return nil }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := e.r.Backing(ctx, m); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNoBacking) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%v, want ErrNoBacking wrapping the deadline", err)
		}
		close(release)
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("Backing did not return when its ctx ended")
	}
	e.handOver(m)
	if s := e.r.Stats(); s.PassthroughVerified != 1 {
		t.Fatalf("%d verifications, want 1", s.PassthroughVerified)
	}
}

// TestBackingTouch: a file last touched long ago is touched before it is
// verified (the disk tier's LRU mark), and then handed over by its stamp.
func TestBackingTouch(t *testing.T) {
	e := newBackingEnv(t)
	m := e.member(2 * BlockSize)
	p := e.put(m, e.data[m.Digest])
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(p, old, old)
	e.handOver(m)
	info, _ := os.Stat(p)
	if age := time.Since(info.ModTime()); age > time.Minute {
		t.Fatalf("mtime %v old after the hand-over", age)
	}
	e.handOver(m)
	if s := e.r.Stats(); s.PassthroughVerified != 1 {
		t.Fatalf("%d verifications: the touch was not in the stamp", s.PassthroughVerified)
	}
}

// TestBackingChangedDuringVerification: a file whose stamp changes while
// it is read is handed over to no one and verified again next time.
func TestBackingChangedDuringVerification(t *testing.T) {
	e := newBackingEnv(t)
	m := e.member(2 * BlockSize)
	p := e.put(m, e.data[m.Digest])
	var once sync.Once
	e.obs.Fail = func() error {
		once.Do(func() { os.Chmod(p, 0o600); os.Chmod(p, 0o400) }) // ctime moves
		return nil
	}
	if _, err := e.r.Backing(context.Background(), m); !errors.Is(err, ErrNoBacking) {
		t.Fatalf("%v, want ErrNoBacking", err)
	}
	e.handOver(m)
	if s := e.r.Stats(); s.PassthroughVerified != 1 || s.PassthroughBytesRead != 2*m.Size {
		t.Fatalf("%d verified, %d bytes read; want 1, %d", s.PassthroughVerified, s.PassthroughBytesRead, 2*m.Size)
	}
}

// TestBackingBadOutboard: a bad cached outboard is not blamed on the file.
func TestBackingBadOutboard(t *testing.T) {
	e := newBackingEnv(t)
	m := e.member(3 * BlockSize)
	p := e.put(m, e.data[m.Digest])
	e.obs.bad[m.Digest] = true
	e.handOver(m)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the good file was removed: %v", err)
	}
	if s := e.r.Stats(); s.Mismatches != 0 || len(e.rec.all()) != 0 {
		t.Fatalf("%d mismatches, %d events for a bad outboard", s.Mismatches, len(e.rec.all()))
	}
}

// TestBackingNotRecorded: a mismatch the Reporter cannot record fails
// the open's fallback read too, until it is recorded.
func TestBackingNotRecorded(t *testing.T) {
	e := newBackingEnv(t)
	m := e.member(2 * BlockSize)
	bad := bytes.Clone(e.data[m.Digest])
	bad[0] ^= 1
	e.put(m, bad)
	e.rec.failWith(errors.New("run record full"))
	if _, err := e.r.Backing(context.Background(), m); !errors.Is(err, ErrNoBacking) || !errors.Is(err, ErrNotRecorded) {
		t.Fatalf("%v, want ErrNoBacking and ErrNotRecorded", err)
	}
	buf := make([]byte, 10)
	if _, err := e.r.ReadAt(context.Background(), m, buf, 0); !errors.Is(err, ErrNotRecorded) {
		t.Fatalf("read with the event owed: %v, want ErrNotRecorded", err)
	}
	e.rec.failWith(nil)
	e.readAll(e.r, m, 1<<16)
	if evs := e.rec.all(); len(evs) != 1 || evs[0].From != FromDisk {
		t.Fatalf("events %+v, want the owed mismatch From disk", evs)
	}
}

// TestBackingEveryByte: one flipped byte anywhere fails the file, in a
// member of one block and in every worker's share of a larger one.
func TestBackingEveryByte(t *testing.T) {
	big := int64(2*verifyChunk + 3*BlockSize + 123)
	for _, c := range []struct{ size, at int64 }{
		{1000, 999}, {BlockSize, 0},
		{big, 0}, {big, verifyChunk - 1}, {big, verifyChunk}, {big, 2*verifyChunk + 5}, {big, big - 1},
	} {
		e := newBackingEnv(t)
		m := e.member(c.size)
		bad := bytes.Clone(e.data[m.Digest])
		bad[c.at] ^= 0x80
		e.put(m, bad)
		if _, err := e.r.Backing(context.Background(), m); !errors.Is(err, b3.ErrMismatch) {
			t.Fatalf("size %d, byte %d flipped: %v, want b3.ErrMismatch", c.size, c.at, err)
		}
	}
}

// TestBackingStampFields: a recorded stamp that differs from the file's
// in any one field has the file verified again. (A change on disk moves
// ctime along with the others; this checks each field on its own.)
func TestBackingStampFields(t *testing.T) {
	e := newBackingEnv(t)
	m := e.member(2 * BlockSize)
	p := e.put(m, e.data[m.Digest])
	e.handOver(m)
	rec, _ := e.r.stamps.Get(m.Digest)
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	if want := (stamp{st.Dev, st.Ino, st.Size, st.Mtim, st.Ctim}); rec != want {
		t.Fatalf("recorded stamp %+v, the file's %+v", rec, want)
	}
	for i, change := range []func(s *stamp){
		func(s *stamp) { s.dev++ },
		func(s *stamp) { s.ino++ },
		func(s *stamp) { s.size++ },
		func(s *stamp) { s.mtime.Nsec ^= 1 },
		func(s *stamp) { s.ctime.Nsec ^= 1 },
	} {
		s := rec
		change(&s)
		e.r.stamps.Put(m.Digest, s)
		e.r.unstamp(m) // the durable stamp would hand it over (backing_stamp_test.go)
		e.handOver(m)
		if got := e.r.Stats().PassthroughVerified; got != int64(i+2) {
			t.Fatalf("field %d: %d verifications, want %d", i, got, i+2)
		}
	}
}

// TestBackingRecheck: a live backing file whose stamp is the one recorded
// passes Recheck without a read; one written to in place (same inode) is
// verified again, fails, and is reported From "disk".
func TestBackingRecheck(t *testing.T) {
	e := newBackingEnv(t)
	m := e.member(3 * BlockSize)
	p := e.put(m, e.data[m.Digest])
	f, err := e.r.Backing(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := e.r.Recheck(context.Background(), m, f); err != nil {
		t.Fatalf("Recheck of an unchanged file: %v", err)
	}
	if s := e.r.Stats(); s.PassthroughVerified != 1 {
		t.Fatalf("%d verifications, want 1: an unchanged file is not read again", s.PassthroughVerified)
	}
	os.Chmod(p, 0o600)
	w, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteAt([]byte{e.data[m.Digest][BlockSize] ^ 1}, BlockSize)
	w.Close()
	os.Chmod(p, 0o400)
	err = e.r.Recheck(context.Background(), m, f)
	if !errors.Is(err, b3.ErrMismatch) {
		t.Fatalf("Recheck of a file written in place: %v, want b3.ErrMismatch", err)
	}
	if evs := e.rec.all(); len(evs) != 1 || evs[0].From != FromDisk {
		t.Fatalf("events %+v, want one mismatch From disk", evs)
	}
}

// TestBackingTouchHourly: a file handed over by its stamp is touched (and
// so verified again) once its mtime is older than touchAge, so that the
// disk tier's eviction order sees it used.
func TestBackingTouchHourly(t *testing.T) {
	e := newBackingEnv(t)
	m := e.member(2 * BlockSize)
	p := e.put(m, e.data[m.Digest])
	e.handOver(m)
	e.handOver(m)
	if s := e.r.Stats(); s.PassthroughVerified != 1 {
		t.Fatalf("%d verifications of a fresh file, want 1", s.PassthroughVerified)
	}
	// Aged past touchAge, stamp recorded as it is now: the next hand-over touches it.
	old := time.Now().Add(-2 * touchAge)
	os.Chtimes(p, old, old)
	var st unix.Stat_t
	unix.Stat(p, &st)
	e.r.stamps.Put(m.Digest, stampOf(&st))
	e.handOver(m)
	info, _ := os.Stat(p)
	if age := time.Since(info.ModTime()); age > time.Minute {
		t.Fatalf("an aged file handed over by its stamp was not touched (mtime %v old)", age)
	}
	if s := e.r.Stats(); s.PassthroughVerified != 2 {
		t.Fatalf("%d verifications, want 2: the touch changed the stamp", s.PassthroughVerified)
	}
}

// TestVerifyFileCutShort: a member file shorter than the member under the
// mapping verifyFile reads (cut after the size check) fails with an error,
// and the fault does not crash the process.
func TestVerifyFileCutShort(t *testing.T) {
	e := newBackingEnv(t)
	m := e.member(3*verifyChunk + 77)
	p := e.put(m, e.data[m.Digest][:2*verifyChunk+5])
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ob, err := e.r.outboard(context.Background(), m, false)
	if err != nil {
		t.Fatal(err)
	}
	err = e.r.verifyFile(context.Background(), f, m, ob, 2)
	if err == nil || errors.Is(err, b3.ErrMismatch) {
		t.Fatalf("a file cut short under the mapping: %v, want a read error", err)
	}
}
