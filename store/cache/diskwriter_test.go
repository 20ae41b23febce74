package cache

import (
	"bytes"
	"os"
	"testing"
	"time"
)

// holdWriter makes d's writer wait before each batch until the returned
// function is called.
func holdWriter(d *Disk) (release func()) {
	gate := make(chan struct{})
	d.beforeBatch = func() { <-gate }
	return func() { close(gate) }
}

// A queued block is served at once, written once, and on disk after Flush.
func TestDiskWriteBehind(t *testing.T) {
	d := openDisk(t, t.TempDir(), 8*BlockSize)
	release := holdWriter(d)
	k := key(1, 0)
	b := block(k, 5000)
	if err := d.Put(k, 5000, b); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(k, 5000, block(k, 5000)); err != nil { // the reader fetched it twice
		t.Fatal(err)
	}
	if got, ok := d.Get(k, 5000); !ok || !bytes.Equal(got, b) || !d.Has(k, 5000) {
		t.Fatalf("a queued block is not served: Get %v, Has %v", ok, d.Has(k, 5000))
	}
	if _, err := os.Stat(d.MemberPath(k.Digest)); err == nil {
		t.Fatal("the block reached the directory while the writer was held")
	}
	release()
	d.Flush()
	if got, err := os.ReadFile(d.MemberPath(k.Digest)); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("after Flush: %v", err)
	}
	if st := d.Stats(); st.Writes != 1 || st.Blocks != 1 || st.Bytes != 5000 || st.Hits != 1 {
		t.Fatalf("stats %+v, want one write", st)
	}
}

// A queue that stays full drops blocks after queueWait and counts them.
func TestDiskQueueFull(t *testing.T) {
	d := openDisk(t, t.TempDir(), 1<<30)
	d.queueWait = 10 * time.Millisecond
	release := holdWriter(d)
	data := make([]byte, BlockSize)
	const n = maxQueued/BlockSize + 3
	for i := range n {
		if err := d.Put(key(i, 0), BlockSize, data); err != nil {
			t.Fatal(err)
		}
	}
	st := d.Stats()
	if st.Dropped != 3 {
		t.Fatalf("stats %+v, want 3 dropped", st)
	}
	if d.Has(key(n-1, 0), BlockSize) {
		t.Fatal("a dropped block is served")
	}
	release()
	d.Flush()
	if st := d.Stats(); st.Writes != n-3 || st.Blocks != n-3 {
		t.Fatalf("after Flush: %+v, want %d written", st, n-3)
	}
	// The queue has room again.
	if d.Put(key(n, 0), BlockSize, data); !d.Has(key(n, 0), BlockSize) || d.Stats().Dropped != 3 {
		t.Fatal("the queue does not take blocks after it drained")
	}
}

// Remove drops a queued block: it is neither served nor written.
func TestDiskRemoveQueued(t *testing.T) {
	d := openDisk(t, t.TempDir(), 8*BlockSize)
	release := holdWriter(d)
	k, other := key(1, 0), key(2, 0)
	d.Put(k, 100, block(k, 100))
	d.Put(other, 100, block(other, 100))
	d.Remove(k)
	if d.Has(k, 100) {
		t.Fatal("a removed queued block is served")
	}
	release()
	d.Flush()
	if _, err := os.Stat(d.MemberPath(k.Digest)); err == nil {
		t.Fatal("a removed queued block was written")
	}
	if !d.Has(other, 100) || d.Stats().Writes != 1 {
		t.Fatalf("the other block: Has %v, stats %+v", d.Has(other, 100), d.Stats())
	}
}

// Close writes what is queued.
func TestDiskCloseFlushes(t *testing.T) {
	dir := t.TempDir()
	d, err := OpenDisk(dir, 8*BlockSize)
	if err != nil {
		t.Fatal(err)
	}
	var keys []Key
	for i := range 40 {
		k := key(i, 0)
		keys = append(keys, k)
		d.Put(k, 1000, block(k, 1000))
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2 := openDisk(t, dir, 8*BlockSize)
	for _, k := range keys {
		if b, ok := d2.Get(k, 1000); !ok || !bytes.Equal(b, block(k, 1000)) {
			t.Fatalf("block %v not on disk after Close", k)
		}
	}
	if st := d2.Stats(); st.Blocks != 40 {
		t.Fatalf("stats after reopen %+v", st)
	}
}

// A Put on a full queue waits for the writer to make room instead of
// dropping the block: a fast stream leaves no holes in the cache.
func TestDiskQueueWaits(t *testing.T) {
	d := openDisk(t, t.TempDir(), 1<<30)
	d.queueWait = time.Minute
	release := holdWriter(d)
	data := make([]byte, BlockSize)
	const n = maxQueued / BlockSize
	for i := range n {
		d.Put(key(i, 0), BlockSize, data)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		release()
	}()
	d.Put(key(n, 0), BlockSize, data) // waits for the release, then for room
	d.Flush()
	if st := d.Stats(); st.Dropped != 0 || st.Writes != n+1 || !d.Has(key(n, 0), BlockSize) {
		t.Fatalf("stats %+v: want %d blocks written, none dropped", st, n+1)
	}
}
