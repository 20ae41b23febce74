package blocks

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/verify/b3"
)

// TestStampWriterOpen: a file open for writing while it is verified (here
// through a writable mapping, whose later writes to a page already dirty
// set no time at all) is handed over but gets no stamp, durable or in
// memory: the next open, in the same mount or a new one, verifies it
// again and finds what was written after the verification.
func TestStampWriterOpen(t *testing.T) {
	for _, remount := range []bool{false, true} {
		e := newStampEnv(t)
		m := e.member(3 * BlockSize)
		p := e.put(m, e.data[m.Digest])
		w, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		mp, err := unix.Mmap(int(w.Fd()), 0, int(m.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		mp[5] = e.data[m.Digest][5] // dirty the page, same byte
		e.handOver(m)
		if _, ok := e.durableOf(m); ok {
			t.Fatal("a durable stamp for a file open for writing")
		}
		var before, after unix.Stat_t
		unix.Stat(p, &before)
		mp[5] ^= 1 // the page is dirty: no time moves
		unix.Stat(p, &after)
		if before.Ctim != after.Ctim {
			t.Logf("this kernel moved ctime on a write to a dirty page (it need not)")
		}
		if remount {
			e.remount()
		}
		if _, err := e.r.Backing(context.Background(), m); !errors.Is(err, b3.ErrMismatch) {
			t.Fatalf("remount %v: after a write through the mapping: %v, want b3.ErrMismatch", remount, err)
		}
		unix.Munmap(mp)
		w.Close()
	}
}

// TestStampLeaseBroken: a file opened for writing while it is verified
// breaks the lease: the open waits for the verification, and the file
// gets no durable stamp.
func TestStampLeaseBroken(t *testing.T) {
	e := newStampEnv(t)
	m := e.member(3 * BlockSize)
	p := e.put(m, e.data[m.Digest])
	var st unix.Stat_t
	unix.Stat(p, &st)
	opened := make(chan error, 1)
	var once bool
	e.obs.Fail = func() error { // runs under the lease, before the read
		if once {
			return nil
		}
		once = true
		go func() {
			w, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err == nil {
				w.Close()
			}
			opened <- err
		}()
		if !waitLeaseBreaking(st.Ino, 5*time.Second) {
			t.Error("the open for writing did not break the lease within 5 s")
		}
		return nil
	}
	e.handOver(m)
	select {
	case err := <-opened:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the open for writing did not go on once the verification was done")
	}
	if _, ok := e.durableOf(m); ok {
		t.Fatal("a durable stamp although the lease was broken")
	}
	e.remount()
	e.handOver(m)
	wantReads(t, e.r, "after a broken lease", 1, m.Size)
}

// waitLeaseBreaking waits, at most d, until /proc/locks shows a lease on
// inode ino being broken.
func waitLeaseBreaking(ino uint64, d time.Duration) bool {
	suffix := fmt.Sprintf(":%d ", ino)
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, _ := os.ReadFile("/proc/locks")
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "LEASE") && strings.Contains(l, "BREAKING") && strings.Contains(l, suffix) {
				return true
			}
		}
	}
	return false
}

// TestStampTouchCarried: a file due for its hourly touch whose durable
// stamp matches is touched under the lease and stamped again, without a
// read; the next mount hands it over by the new stamp.
func TestStampTouchCarried(t *testing.T) {
	e := newStampEnv(t)
	m := e.member(3*BlockSize + 5)
	p := e.put(m, e.data[m.Digest])
	e.handOver(m)
	// As if the mount that verified it did so more than touchAge ago.
	old := time.Now().Add(-2 * touchAge)
	os.Chtimes(p, old, old)
	var st unix.Stat_t
	unix.Stat(p, &st)
	if !e.r.stampDurably(m, stampOf(&st)) {
		t.Fatal("stampDurably failed")
	}
	r := e.remount()
	e.handOver(m)
	wantReads(t, r, "touch carried over", 0, 0)
	info, _ := os.Stat(p)
	if age := time.Since(info.ModTime()); age > time.Minute {
		t.Fatalf("not touched: mtime %v old", age)
	}
	d, ok := e.durableOf(m)
	unix.Stat(p, &st)
	if !ok || d.st != stampOf(&st) {
		t.Fatalf("durable stamp %+v after the touch, the file's %+v", d.st, stampOf(&st))
	}
	e.remount()
	e.handOver(m)
	wantReads(t, e.r, "after the carried touch", 0, 0)
}

// TestStampPrune: a directory whose attributes are full of stale stamps
// (another boot, files gone) makes room for a new one.
func TestStampPrune(t *testing.T) {
	e := newStampEnv(t)
	m := e.member(2 * BlockSize)
	p := e.put(m, e.data[m.Digest])
	dir := filepath.Dir(p)
	full := false
	for i := range 500 {
		var dg b3.Sum
		binary.BigEndian.PutUint64(dg[:], uint64(i)<<8|0xee) // names unlike m's
		v := durable{digest: dg}.encode()                    // boot zero: another boot
		if err := unix.Setxattr(dir, stampName(dg), v, 0); err != nil {
			if err != unix.ENOSPC && err != unix.E2BIG {
				t.Fatal(err)
			}
			full = true
			break
		}
	}
	e.handOver(m)
	if _, ok := e.durableOf(m); !ok {
		t.Fatalf("no durable stamp (directory full: %v)", full)
	}
	if !full {
		t.Logf("this file system took 500 stamps in one directory: pruning not exercised")
	}
}

// TestStampNoVerityHere: where the file system has no fs-verity (this
// machine), a verified file stays as it is and gets a ctime stamp.
func TestStampNoVerityHere(t *testing.T) {
	e := newStampEnv(t)
	m := e.member(2 * BlockSize)
	p := e.put(m, e.data[m.Digest])
	e.handOver(m)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, _, ok := measureVerity(f.Fd()); ok {
		t.Skip("this file system has fs-verity: the verity path is taken, and this test is about its absence")
	}
	if n, err := unix.Getxattr(p, verityAttr, nil); err == nil {
		t.Fatalf("a verity stamp (%d bytes) on a file that is not a verity file", n)
	}
	if _, ok := e.durableOf(m); !ok {
		t.Fatal("no ctime stamp")
	}
}

// TestSettled: settled returns only once the coarse clock (which a
// change's ctime is taken from) is past the ctime it is given, or past
// its second when it has no nanoseconds, and refuses a ctime the clock
// will not reach within maxSettle.
func TestSettled(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, nil, 0o600)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z := freezeFile(f)
	defer z.release()
	if !z.ok {
		if os.Getenv("CI") == "true" {
			t.Fatal("no read lease on a file of the temp dir")
		}
		t.Skip("no read lease on a file of the temp dir")
	}
	coarse := func() unix.Timespec {
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts)
		return ts
	}
	ctx := context.Background()
	c := coarse()
	c.Nsec |= 1 // not a whole second
	if !z.settled(ctx, c) {
		t.Fatal("settled refused the current time")
	}
	if now := coarse(); now.Nano() <= c.Nano() {
		t.Fatalf("settled returned at %v, not past %v", now.Nano(), c.Nano())
	}
	whole := unix.Timespec{Sec: coarse().Sec}
	if !z.settled(ctx, whole) {
		t.Fatal("settled refused the current second")
	}
	if now := coarse(); now.Sec <= whole.Sec {
		t.Fatalf("settled returned in second %d, the ctime's own", now.Sec)
	}
	if future := (unix.Timespec{Sec: coarse().Sec + 60, Nsec: 1}); z.settled(ctx, future) {
		t.Fatal("settled accepted a ctime a minute ahead of the clock")
	}
	if (freeze{}).settled(ctx, unix.Timespec{}) {
		t.Fatal("settled without a lease")
	}
}
