package cache

import (
	"bytes"
	"context"
	"os"
	"sync"
	"testing"

	"github.com/pinfs/pinfs/store/pool/pooltest"

	"github.com/pinfs/pinfs/store/pool"
)

// The write-behind queue holds its own reference to a pool block: the
// caller releases its own at once, the pool then churns through every
// other slot, and the block still reaches the directory (and ReadInto)
// with its own bytes; once written, its slot is free again. A queue
// that did not hold the block would write whatever the slot held next
// (and, built with pooldebug, the churn's Get would panic on the write).
func TestDiskQueueHoldsItsBlock(t *testing.T) {
	p := pooltest.New(t, 3)
	d := openDisk(t, t.TempDir(), 64*BlockSize)
	release := onceFunc(t, holdWriter(d))
	ctx := context.Background()
	k := key(7, 0)
	want := block(k, BlockSize)
	b, err := p.Get(ctx, BlockSize, pool.Flight)
	if err != nil {
		t.Fatal(err)
	}
	copy(b.Bytes(), want)
	if err := d.PutBlock(k, BlockSize, b); err != nil {
		t.Fatal(err)
	}
	b.Release(pool.Flight)
	if n := p.Stats().InUse["disk_queue"]; n != 1 {
		t.Fatalf("the queue holds %d references, want 1", n)
	}
	// Churn the other slots: if the queued block's slot were free, one of
	// these would take it and overwrite it.
	for i := range 20 {
		o, err := p.Get(ctx, BlockSize, pool.Flight)
		if err != nil {
			t.Fatal(err)
		}
		copy(o.Bytes(), block(key(100+i, 0), BlockSize))
		o.Release(pool.Flight)
	}
	got := make([]byte, BlockSize)
	if !d.ReadInto(k, BlockSize, got) || !bytes.Equal(got, want) {
		t.Fatal("the queued block's bytes changed while the queue held it")
	}
	release()
	d.Flush()
	if f, err := os.ReadFile(d.MemberPath(k.Digest)); err != nil || !bytes.Equal(f, want) {
		t.Fatalf("written: %v, bytes equal %v", err, bytes.Equal(f, want))
	}
	if st := p.Stats(); st.Free != st.Slots || st.InUse["disk_queue"] != 0 {
		t.Fatalf("after the write the queue still holds: %+v", st)
	}
}

// A block the queue refuses (one of the same key queued already, or a
// full queue) is released at once.
func TestDiskQueueReleasesWhatItRefuses(t *testing.T) {
	p := pooltest.New(t, 2)
	d := openDisk(t, t.TempDir(), 64*BlockSize)
	release := onceFunc(t, holdWriter(d))
	k := key(8, 0)
	for range 2 {
		b, _ := p.Get(context.Background(), BlockSize, pool.Flight)
		copy(b.Bytes(), block(k, BlockSize))
		if err := d.PutBlock(k, BlockSize, b); err != nil {
			t.Fatal(err)
		}
		b.Release(pool.Flight)
	}
	if n := p.Stats().InUse["disk_queue"]; n != 1 {
		t.Fatalf("two Puts of one key: the queue holds %d references, want 1", n)
	}
	release()
	d.Flush()
}

// onceFunc returns f to be called once, and calls it at cleanup if the
// test did not: a failed test must not leave the writer held, or the
// Disk's Close waits for it for ever.
func onceFunc(t *testing.T, f func()) func() {
	g := sync.OnceFunc(f)
	t.Cleanup(g)
	return g
}
