package cache

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDiskWriteNoEvictionForANamedBlock: a block that another process
// names while this one has it staged evicts nothing on either write path
// (O_TMPFILE and temporary name): the writer looks for the name before it
// makes room, instead of evicting first and finding EEXIST at link.
func TestDiskWriteNoEvictionForANamedBlock(t *testing.T) {
	for _, noTmpfile := range []bool{false, true} {
		dir := t.TempDir()
		const n = 1000
		a := openDisk(t, dir, 3*n)
		a.noTmpfile.Store(noTmpfile)
		k1, k2, k3 := key(1, 0), key(2, 0), key(3, 0)
		for _, k := range []Key{k1, k2} {
			if err := a.Put(k, n, block(k, n)); err != nil {
				t.Fatal(err)
			}
		}
		a.Flush()
		old := time.Now().Add(-time.Hour)
		os.Chtimes(a.MemberPath(k1.Digest), old, old)
		os.Chtimes(a.MemberPath(k2.Digest), old.Add(time.Minute), old.Add(time.Minute))

		b := openDisk(t, dir, 3*n)
		locked, proceed := make(chan struct{}), make(chan struct{})
		unblock := sync.OnceFunc(func() { close(proceed) })
		t.Cleanup(unblock)
		done := make(chan error, 1)
		go func() {
			done <- b.locked(func(tt *totals) error {
				close(locked)
				<-proceed // a has staged k3 and waits for the lock
				p := b.MemberPath(k3.Digest)
				os.MkdirAll(filepath.Dir(p), 0o700)
				if err := os.WriteFile(p, block(k3, n), 0o600); err != nil {
					return err
				}
				tt.bytes += n
				tt.blocks++
				return nil
			})
		}()
		<-locked
		if err := a.Put(k3, n, block(k3, n)); err != nil {
			t.Fatal(err)
		}
		waitFlockWaiter(t, a.lock)
		unblock()
		a.Flush()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the other writer still holds the lock after 30 s")
		}
		_, err1 := os.Stat(a.MemberPath(k1.Digest))
		_, err2 := os.Stat(a.MemberPath(k2.Digest))
		st := a.Stats()
		t.Logf("noTmpfile %v: k1 kept %v, k2 kept %v, evictions %d, writes %d", noTmpfile, err1 == nil, err2 == nil, st.Evictions, st.Writes)
		if st.Evictions > 0 {
			t.Errorf("noTmpfile %v: %d blocks evicted to make room for a block this writer then did not write", noTmpfile, st.Evictions)
		}
	}
}

// waitFlockWaiter waits, at most 10 s, until a flock(2) of this process
// on f's file waits for the lock: a blocked request ("->") of
// /proc/locks names the file's inode.
func waitFlockWaiter(t *testing.T, f *os.File) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	ino, pid := fmt.Sprintf(":%d", st.Ino), fmt.Sprint(os.Getpid())
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b, err := os.ReadFile("/proc/locks")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			// 1: -> FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF
			if f := strings.Fields(line); len(f) > 6 && f[1] == "->" && f[2] == "FLOCK" && f[5] == pid && strings.HasSuffix(f[6], ino) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no flock of %s waiting after 10 s:\n%s", f.Name(), b)
		}
	}
}
