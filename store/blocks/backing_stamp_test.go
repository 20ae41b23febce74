package blocks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/verify/b3"
)

// needStamps checks that the file system of dir keeps durable stamps:
// one of stampFS, trusted attributes (root), leases. Where it does not,
// the test says why and skips, or fails under CI=true.
func needStamps(t *testing.T, dir string) {
	t.Helper()
	var sfs unix.Statfs_t
	why := ""
	if err := unix.Statfs(dir, &sfs); err != nil {
		why = fmt.Sprintf("statfs %s: %v", dir, err)
	} else if stampFS[uint32(sfs.Type)] == "" {
		why = fmt.Sprintf("%s is on a file system (type %#x) that keeps no durable stamps", dir, uint32(sfs.Type))
	} else if err := unix.Setxattr(dir, stampPrefix+"probe", []byte{0}, 0); err != nil {
		why = fmt.Sprintf("the file system of %s refuses trusted.* attributes (%v; they need CAP_SYS_ADMIN)", dir, err)
	} else {
		unix.Removexattr(dir, stampPrefix+"probe")
		p := filepath.Join(dir, "lease-probe")
		os.WriteFile(p, nil, 0o600)
		f, err := os.Open(p)
		if err == nil {
			z := freezeFile(f)
			if !z.ok {
				why = "the file system of " + dir + " grants no read leases (fs.leases-enable=0?)"
			}
			z.release()
			f.Close()
		}
		os.Remove(p)
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("durable stamps cannot be tested here: %s", why)
	}
	t.Skipf("durable stamps cannot be tested here: %s", why)
}

// newStampEnv is a backingEnv whose cache dir keeps durable stamps.
func newStampEnv(t *testing.T) *backingEnv {
	t.Helper()
	e := newBackingEnv(t)
	needStamps(t, e.disk.Dir())
	return e
}

// remount returns a new Reader on a new disk tier over e's cache dir, as
// a new mount of it has, and makes it e's.
func (e *backingEnv) remount() *Reader {
	e.t.Helper()
	d := diskDir(e.t, e.disk.Dir(), 1<<30)
	e.t.Cleanup(func() { d.Close() })
	e.disk = d
	e.r = e.reader(Config{Disk: d})
	return e.r
}

// durableOf returns m's durable stamp as it is stored, if it has one.
func (e *backingEnv) durableOf(m *Member) (durable, bool) {
	var buf [stampLen + 1]byte
	n, err := unix.Getxattr(filepath.Dir(e.disk.MemberPath(m.Digest)), stampName(m.Digest), buf[:])
	if err != nil {
		return durable{}, false
	}
	return decodeDurable(buf[:n])
}

// setDurable stores v as m's durable stamp's value, as only root can.
func (e *backingEnv) setDurable(m *Member, v []byte) {
	e.t.Helper()
	if err := unix.Setxattr(filepath.Dir(e.disk.MemberPath(m.Digest)), stampName(m.Digest), v, 0); err != nil {
		e.t.Fatal(err)
	}
}

// wantReads checks the Reader's verifications and bytes read.
func wantReads(t *testing.T, r *Reader, what string, verified, read int64) {
	t.Helper()
	if s := r.Stats(); s.PassthroughVerified != verified || s.PassthroughBytesRead != read {
		t.Fatalf("%s: %d verifications, %d bytes read; want %d, %d", what, s.PassthroughVerified, s.PassthroughBytesRead, verified, read)
	}
}

// TestStampRemount: a new Reader on the same cache dir (a remount) hands
// an unchanged file over by the durable stamp the first one left,
// without reading it, for Backing and for Recheck.
func TestStampRemount(t *testing.T) {
	for _, size := range []int64{1000, 3*BlockSize + 5} {
		e := newStampEnv(t)
		m := e.member(size)
		p := e.put(m, e.data[m.Digest])
		e.handOver(m)
		wantReads(t, e.r, "first mount", 1, size)
		d, ok := e.durableOf(m)
		var st unix.Stat_t
		unix.Stat(p, &st)
		boot, _ := bootID()
		if !ok || d.digest != m.Digest || d.boot != boot || d.st != stampOf(&st) {
			t.Fatalf("size %d: durable stamp %+v (%v), want the file's %+v of this boot", size, d, ok, stampOf(&st))
		}
		r := e.remount()
		e.handOver(m)
		e.handOver(m)
		wantReads(t, r, "remount", 0, 0)
		if s := r.Stats(); s.PassthroughHanded != 2 {
			t.Fatalf("size %d: %d hand-overs, want 2", size, s.PassthroughHanded)
		}
		r = e.remount()
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		err = r.Recheck(context.Background(), m, f)
		f.Close()
		if err != nil {
			t.Fatalf("size %d: Recheck after a remount: %v", size, err)
		}
		wantReads(t, r, "Recheck after a remount", 0, 0)
	}
}

// TestStampChanged: a stamped file changed in any way before the
// remount — bytes written in place (same size, mtime put back),
// replaced by another file (even of the same bytes), given a second name
// — is verified again; a changed one fails.
func TestStampChanged(t *testing.T) {
	cases := []struct {
		name   string
		change func(e *backingEnv, m *Member, p string)
		bad    bool
	}{
		{"written in place, mtime put back", func(e *backingEnv, m *Member, p string) {
			info, _ := os.Stat(p)
			w, err := os.OpenFile(p, os.O_WRONLY, 0) // root: the mode does not stop it
			if err != nil {
				t.Fatal(err)
			}
			w.WriteAt([]byte{e.data[m.Digest][m.Size/2] ^ 1}, m.Size/2)
			w.Close()
			if err := os.Chtimes(p, info.ModTime(), info.ModTime()); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"replaced by a copy (rename over)", func(e *backingEnv, m *Member, p string) {
			os.WriteFile(p+".new", e.data[m.Digest], 0o400)
			os.Chmod(p+".new", 0o400)
			if err := os.Rename(p+".new", p); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"hard-linked", func(e *backingEnv, m *Member, p string) {
			if err := os.Link(p, p+".link"); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newStampEnv(t)
			m := e.member(3*BlockSize + 5)
			p := e.put(m, e.data[m.Digest])
			e.handOver(m)
			c.change(e, m, p)
			r := e.remount()
			if c.bad {
				_, err := r.Backing(context.Background(), m)
				if !errors.Is(err, b3.ErrMismatch) {
					t.Fatalf("%v, want b3.ErrMismatch", err)
				}
				if s := r.Stats(); s.PassthroughBytesRead != m.Size || s.Mismatches != 1 {
					t.Fatalf("%d bytes read, %d mismatches; want %d, 1", s.PassthroughBytesRead, s.Mismatches, m.Size)
				}
				if _, ok := e.durableOf(m); ok {
					t.Fatal("the damaged file's durable stamp is still there")
				}
				return
			}
			e.handOver(m)
			wantReads(t, r, "after the change", 1, m.Size)
			// Verified again, it is stamped again: a second name does
			// not keep it from being handed over by its stamp.
			e.remount()
			e.handOver(m)
			wantReads(t, e.r, "the next remount", 0, 0)
		})
	}
}

// TestStampForged: a durable stamp the verifier did not write for this
// file — another file's stamp copied over, a stamp of the file's own
// state but naming another digest or another boot, a value of another
// version or length — is not believed.
func TestStampForged(t *testing.T) {
	e := newStampEnv(t)
	a, b := e.member(2*BlockSize+1), e.member(3*BlockSize+7)
	e.put(a, e.data[a.Digest])
	pb := e.put(b, e.data[b.Digest])
	e.handOver(a)
	e.handOver(b)
	da, ok1 := e.durableOf(a)
	db, ok2 := e.durableOf(b)
	if !ok1 || !ok2 {
		t.Fatal("no durable stamps after the first hand-overs")
	}
	var st unix.Stat_t
	unix.Stat(pb, &st)
	otherBoot := db
	otherBoot.boot[0] ^= 1
	otherDigest := db
	otherDigest.digest = a.Digest
	long := append(db.encode(), 0)
	newer := db.encode()
	newer[0]++
	for _, c := range []struct {
		name string
		v    []byte
	}{
		{"a's stamp copied to b", da.encode()},
		{"b's own state, naming a's digest", otherDigest.encode()},
		{"b's own state, another boot", otherBoot.encode()},
		{"b's own stamp, one byte longer", long},
		{"b's own stamp, another version", newer},
	} {
		e.setDurable(b, c.v)
		r := e.remount()
		e.handOver(b)
		wantReads(t, r, c.name, 1, b.Size)
	}
	// The last verification left b's true stamp, which is believed.
	e.remount()
	e.handOver(b)
	wantReads(t, e.r, "b's true stamp", 0, 0)
}

// TestStampValue: a durable stamp's value decodes to what was encoded,
// and nothing else decodes.
func TestStampValue(t *testing.T) {
	d := durable{digest: b3.Of([]byte("x")), st: stamp{dev: 1, ino: 2, size: 3,
		mtime: unix.Timespec{Sec: 4, Nsec: 5}, ctime: unix.Timespec{Sec: 1 << 40, Nsec: 999999999}}}
	d.boot[15] = 7
	v := d.encode()
	if len(v) != stampLen {
		t.Fatalf("%d bytes, want %d", len(v), stampLen)
	}
	if got, ok := decodeDurable(v); !ok || got != d {
		t.Fatalf("decoded %+v (%v), want %+v", got, ok, d)
	}
	for _, bad := range [][]byte{v[:stampLen-1], append(bytes.Clone(v), 0), append([]byte{stampVersion + 1}, v[1:]...), nil} {
		if _, ok := decodeDurable(bad); ok {
			t.Fatalf("decoded a value of %d bytes, version %v", len(bad), bad)
		}
	}
}
