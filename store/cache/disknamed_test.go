package cache

import (
	"os"
	"path/filepath"
	"testing"
	"time"
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
		locked := make(chan struct{})
		done := make(chan error)
		go func() {
			done <- b.locked(func(tt *totals) error {
				close(locked)
				time.Sleep(300 * time.Millisecond) // a stages k3 and waits for the lock
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
		a.Flush()
		if err := <-done; err != nil {
			t.Fatal(err)
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
