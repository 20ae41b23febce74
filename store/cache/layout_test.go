package cache

import (
	"bytes"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// memberData returns size bytes that differ from block to block.
func memberData(k Key, size int64) []byte {
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(k.Digest[0]), uint64(size)))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// blockOf returns block i of data.
func blockOf(data []byte, i int64) []byte {
	size := int64(len(data))
	return data[i*BlockSize : i*BlockSize+blockLen(size, i)]
}

// checkWhole checks that k's member is one file of data, mode 0400, with
// no partial file beside it.
func checkWhole(t testing.TB, d *Disk, k Key, data []byte) {
	t.Helper()
	info, err := os.Lstat(d.MemberPath(k.Digest))
	if err != nil {
		t.Fatalf("no whole-member file: %v", err)
	}
	if !info.Mode().IsRegular() || info.Mode().Perm() != 0o400 || info.Size() != int64(len(data)) {
		t.Fatalf("whole-member file: mode %v, %d bytes; want a 0400 file of %d", info.Mode(), info.Size(), len(data))
	}
	if got, err := os.ReadFile(d.MemberPath(k.Digest)); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("whole-member file: wrong bytes (%v)", err)
	}
	if _, err := os.Lstat(d.partPath(k.Digest)); err == nil {
		t.Fatal("a partial file is left beside the whole-member file")
	}
}

// putMember puts the blocks of data, k's member, in the order given, each
// flushed on its own (one batch each).
func putMember(t testing.TB, d *Disk, k Key, data []byte, order []int64) {
	t.Helper()
	for _, i := range order {
		if err := d.Put(Key{k.Digest, i}, int64(len(data)), blockOf(data, i)); err != nil {
			t.Fatal(err)
		}
		d.Flush()
	}
}

// A member written block by block in random order is found block by block
// in its partial file before it is complete, and becomes one 0400 file of
// its size with its bytes when the last block is written.
func TestDiskMemberRandomOrder(t *testing.T) {
	d := openDisk(t, t.TempDir(), 64*BlockSize)
	k := key(1, 0)
	size := int64(5*BlockSize + 12345)
	data := memberData(k, size)
	order := rand.Perm(6)
	for n, j := range order {
		i := int64(j)
		putMember(t, d, k, data, []int64{i})
		if n == len(order)-1 {
			break
		}
		if _, err := os.Lstat(d.MemberPath(k.Digest)); err == nil {
			t.Fatalf("after %d of 6 blocks: a whole-member file", n+1)
		}
		for _, o := range order[:n+1] {
			bk := Key{k.Digest, int64(o)}
			if b, ok := d.Get(bk, size); !ok || !bytes.Equal(b, blockOf(data, bk.Index)) || !d.Has(bk, size) {
				t.Fatalf("after %d blocks: block %d of the partial file: hit %v", n+1, o, ok)
			}
		}
		for _, o := range order[n+1:] {
			if _, ok := d.Get(Key{k.Digest, int64(o)}, size); ok || d.Has(Key{k.Digest, int64(o)}, size) {
				t.Fatalf("after %d blocks: block %d not written is a hit", n+1, o)
			}
		}
		if st := d.Stats(); st.Blocks != int64(n+1) || st.Bytes != dirBytes(t, d.Dir()) {
			t.Fatalf("after %d blocks: stats %+v, %d bytes in files", n+1, st, dirBytes(t, d.Dir()))
		}
	}
	checkWhole(t, d, k, data)
	for i := range int64(6) {
		if b, ok := d.Get(Key{k.Digest, i}, size); !ok || !bytes.Equal(b, blockOf(data, i)) {
			t.Fatalf("block %d of the whole file: hit %v", i, ok)
		}
	}
	if st := d.Stats(); st.Bytes != size || st.Blocks != 6 || st.Writes != 6 {
		t.Fatalf("stats %+v, want %d bytes in 6 blocks", st, size)
	}
	// A block written again is not written, nor the file touched.
	putMember(t, d, k, data, []int64{2})
	if st := d.Stats(); st.Writes != 6 || st.Bytes != size {
		t.Fatalf("a block of a whole member written again: %+v", st)
	}
}

// A block of the wrong length, or past the member's end, is refused.
func TestDiskPutChecksLength(t *testing.T) {
	d := openDisk(t, t.TempDir(), 64*BlockSize)
	k := key(1, 0)
	for _, c := range []struct {
		i, size int64
		n       int
	}{{0, 3 * BlockSize, 100}, {3, 3 * BlockSize, 100}, {1, BlockSize + 10, 11}} {
		if err := d.Put(Key{k.Digest, c.i}, c.size, make([]byte, c.n)); err == nil {
			t.Errorf("Put of %d bytes as block %d of %d: no error", c.n, c.i, c.size)
		}
	}
	d.Flush()
	if st := d.Stats(); st.Writes != 0 || len(files(t, d.Dir())) != 0 {
		t.Fatalf("refused blocks were written: %+v", st)
	}
}

// Remove of a block clears its bit in a partial file (the file goes with
// its last block), and removes a whole-member file whole.
func TestDiskRemoveBlock(t *testing.T) {
	d := openDisk(t, t.TempDir(), 64*BlockSize)
	k := key(1, 0)
	size := int64(3*BlockSize + 7)
	data := memberData(k, size)
	putMember(t, d, k, data, []int64{0, 3})
	d.Remove(Key{k.Digest, 3})
	if _, ok := d.Get(Key{k.Digest, 3}, size); ok {
		t.Fatal("a removed block is served from the partial file")
	}
	if b, ok := d.Get(Key{k.Digest, 0}, size); !ok || !bytes.Equal(b, blockOf(data, 0)) {
		t.Fatal("Remove of one block lost another")
	}
	if st := d.Stats(); st.Bytes != BlockSize || st.Blocks != 1 || st.Removed != 1 {
		t.Fatalf("stats %+v after removing the last block (7 bytes)", st)
	}
	d.Remove(Key{k.Digest, 0})
	if len(files(t, d.Dir())) != 0 || d.Stats().Bytes != 0 {
		t.Fatalf("an empty partial file is left: %v, %+v", files(t, d.Dir()), d.Stats())
	}

	putMember(t, d, k, data, []int64{0, 1, 2, 3})
	checkWhole(t, d, k, data)
	d.Remove(Key{k.Digest, 1})
	if len(files(t, d.Dir())) != 0 || d.Stats().Bytes != 0 || d.Stats().Blocks != 0 {
		t.Fatalf("Remove of a block of a whole member: %v, %+v", files(t, d.Dir()), d.Stats())
	}
	if st := openDisk(t, d.Dir(), 64*BlockSize).Stats(); st.Bytes != 0 {
		t.Fatalf("totals drifted: %+v", st)
	}
}

// RemoveMember removes a partial or whole member and keeps the totals.
func TestDiskRemoveMember(t *testing.T) {
	d := openDisk(t, t.TempDir(), 64*BlockSize)
	other := key(2, 0)
	put(d, other, block(other, 100))
	for _, whole := range []bool{false, true} {
		k := key(1, 0)
		size := int64(2*BlockSize + 1)
		data := memberData(k, size)
		order := []int64{0, 2}
		if whole {
			order = append(order, 1)
		}
		putMember(t, d, k, data, order)
		d.RemoveMember(k.Digest)
		if d.Has(Key{k.Digest, 0}, size) {
			t.Fatalf("whole %v: a block is left", whole)
		}
		if st := d.Stats(); st.Bytes != 100 || st.Blocks != 1 || st.Bytes != dirBytes(t, d.Dir()) {
			t.Fatalf("whole %v: stats %+v", whole, st)
		}
	}
}

// A whole-member file's times are the open path's to keep: Get does not
// touch it within WholeTouchAge of its last touch, even past touchAge,
// while it does touch a partial file older than touchAge.
func TestDiskGetWholeKeepsTimes(t *testing.T) {
	d := openDisk(t, t.TempDir(), 64*BlockSize)
	old := time.Now().Add(-WholeTouchAge / 2)
	k, p := key(1, 0), key(2, 0)
	size := int64(2 * BlockSize)
	putMember(t, d, k, memberData(k, size), []int64{0, 1})
	putMember(t, d, p, memberData(p, size), []int64{1})
	for _, f := range []string{d.MemberPath(k.Digest), d.partPath(p.Digest)} {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	var before unix.Stat_t
	unix.Stat(d.MemberPath(k.Digest), &before)
	if _, ok := d.Get(Key{k.Digest, 1}, size); !ok {
		t.Fatal("miss")
	}
	var after unix.Stat_t
	unix.Stat(d.MemberPath(k.Digest), &after)
	if after.Mtim != before.Mtim || after.Ctim != before.Ctim {
		t.Fatalf("Get changed a whole-member file's times: mtime %v -> %v, ctime %v -> %v", before.Mtim, after.Mtim, before.Ctim, after.Ctim)
	}
	if _, ok := d.Get(Key{p.Digest, 1}, size); !ok {
		t.Fatal("miss in the partial file")
	}
	if info, _ := os.Stat(d.partPath(p.Digest)); time.Since(info.ModTime()) > touchAge {
		t.Fatal("Get did not touch an old partial file")
	}
}

// Eviction removes least recently used members whole, partial or not,
// down to the low-water mark, and the budget holds.
func TestDiskMemberLRU(t *testing.T) {
	dir := t.TempDir()
	d := openDisk(t, dir, 8*BlockSize) // low water: 7 blocks
	size := int64(2 * BlockSize)
	base := time.Now().Add(-time.Hour)
	for i := range 4 {
		k := key(i, 0)
		order := []int64{0, 1}
		if i%2 == 1 {
			order = order[:1] // 1 and 3 stay partial
		}
		putMember(t, d, k, memberData(k, size), order)
		f := d.MemberPath(k.Digest)
		if i%2 == 1 {
			f = d.partPath(k.Digest)
		}
		mt := base.Add(time.Duration([]int{1, 0, 3, 2}[i]) * time.Minute) // 1 oldest, then 0, 3, 2
		os.Chtimes(f, mt, mt)
	}
	if st := d.Stats(); st.Bytes != 6*BlockSize || st.Evictions != 0 {
		t.Fatalf("before: %+v", st)
	}
	// 3 more blocks: 9 > 8, evict down to 7-3 = 4: members 1 (1 block)
	// and 0 (2 blocks) go, 3 and 2 (3 blocks) stay.
	n := key(9, 0)
	putMember(t, d, n, memberData(n, 3*BlockSize), []int64{0, 1, 2})
	for i, want := range []bool{false, false, true, true} {
		k := key(i, 0)
		if got := d.Has(Key{k.Digest, 0}, size); got != want {
			t.Errorf("member %d held %v, want %v", i, got, want)
		}
	}
	st := d.Stats()
	if st.Bytes != 6*BlockSize || st.Bytes != dirBytes(t, dir) || st.Evictions != 3 || st.Blocks != 6 {
		t.Fatalf("after: %+v, %d bytes in files", st, dirBytes(t, dir))
	}
	checkWhole(t, d, n, memberData(n, 3*BlockSize))
	// The blocks of a member larger than the budget are kept in its
	// partial file, which is evicted like any other: the budget holds.
	big := key(10, 0)
	bigData := memberData(big, 9*BlockSize)
	putMember(t, d, big, bigData, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8})
	if st := d.Stats(); st.Bytes > 8*BlockSize || st.Bytes != dirBytes(t, dir) || !d.Has(Key{big.Digest, 8}, 9*BlockSize) {
		t.Fatalf("a member larger than the budget: %+v, %d bytes in files", st, dirBytes(t, dir))
	}
}

// The partial file being written is never the one evicted for it.
func TestDiskEvictionKeepsMemberBeingWritten(t *testing.T) {
	d := openDisk(t, t.TempDir(), 4*BlockSize)
	k, o := key(1, 0), key(2, 0)
	size := int64(4 * BlockSize)
	data := memberData(k, size)
	putMember(t, d, k, data, []int64{0, 1})
	putMember(t, d, o, memberData(o, 2*BlockSize), []int64{0})
	old := time.Now().Add(-time.Hour)
	os.Chtimes(d.partPath(k.Digest), old, old) // the oldest
	putMember(t, d, k, data, []int64{2, 3})
	checkWhole(t, d, k, data)
	if st := d.Stats(); st.Bytes != size || st.Bytes > 4*BlockSize {
		t.Fatalf("stats %+v", st)
	}
}

// Two Disks on one directory writing the same member at once end with one
// correct file and right totals.
func TestDiskSameMemberTwoDisks(t *testing.T) {
	dir := t.TempDir()
	a, b := openDisk(t, dir, 64*BlockSize), openDisk(t, dir, 64*BlockSize)
	k := key(1, 0)
	size := int64(9*BlockSize + 333)
	data := memberData(k, size)
	// Blocks both write before the member is whole are counted once.
	o := key(2, 0)
	odata := memberData(o, 4*BlockSize)
	putMember(t, a, o, odata, []int64{0, 1, 2})
	putMember(t, b, o, odata, []int64{1, 2, 3})
	checkWhole(t, a, o, odata)
	a.RemoveMember(o.Digest)
	if st := a.Stats(); st.Bytes != 0 || st.Blocks != 0 || a.Stats().Writes+b.Stats().Writes != 4 {
		t.Fatalf("after a member both wrote, then removed: %+v, %+v", st, b.Stats())
	}

	var wg sync.WaitGroup
	for _, d := range []*Disk{a, b} {
		wg.Go(func() {
			for _, i := range rand.Perm(10) {
				d.Put(Key{k.Digest, int64(i)}, size, blockOf(data, int64(i)))
				if i%3 == 0 {
					d.Flush()
				}
			}
			d.Flush()
		})
	}
	wg.Wait()
	checkWhole(t, a, k, data)
	var kept totals // the totals the writers kept, before any listing corrects them
	a.locked(func(t *totals) error { kept = *t; return nil })
	if !kept.ok || kept.bytes != size || kept.blocks != 10 {
		t.Fatalf("totals kept by the writers %+v, want %d bytes in 10 blocks", kept, size)
	}
	if st := openDisk(t, dir, 64*BlockSize).Stats(); st.Bytes != size || st.Blocks != 10 {
		t.Fatalf("after a listing: %+v", st)
	}
	if w := a.Stats().Writes + b.Stats().Writes; w != 14 {
		t.Fatalf("%d blocks written by the two, want 4 + 10", w)
	}
}

// A whole-member file read only through Get (a mount without passthrough,
// or a cached open) is still used: Get touches it once it is older than
// WholeTouchAge, so that eviction removes the least recently used member,
// not the one completed first.
func TestDiskGetTouchesOldWhole(t *testing.T) {
	d := openDisk(t, t.TempDir(), 64*BlockSize)
	old := time.Now().Add(-2 * WholeTouchAge)
	size := int64(2 * BlockSize)
	for i, k := range []Key{key(1, 0), key(2, 0), key(3, 0)} {
		if i == 2 {
			size = 100 // a member of one block is a whole-member file at once
		}
		putMember(t, d, k, memberData(k, size), []int64{0, 1}[:numBlocks(size)])
		if err := os.Chtimes(d.MemberPath(k.Digest), old, old); err != nil {
			t.Fatal(err)
		}
		if _, ok := d.Get(Key{k.Digest, numBlocks(size) - 1}, size); !ok {
			t.Fatalf("member %d: miss", i)
		}
		info, err := os.Stat(d.MemberPath(k.Digest))
		if err != nil || time.Since(info.ModTime()) > time.Minute {
			t.Fatalf("member %d: Get left an old whole-member file untouched: %v %v", i, info.ModTime(), err)
		}
	}
}
