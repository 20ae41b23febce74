package cache

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/pinfs/pinfs/store/pool"
	"github.com/pinfs/pinfs/verify/b3"
)

// Write-behind. Put hands a block to the Disk's writer goroutine and
// returns: the read path never waits for a file create, a rename or the
// directory's lock. The writer takes what is queued in batches, writes
// each member of one block to an unnamed file, then, under one hold of the
// lock, names those, writes the blocks of larger members into their
// partial files and updates the directory's totals.

const (
	// maxQueued bounds the bytes of blocks accepted by Put and not yet
	// written, so that a stream faster than the disk does not fill memory.
	maxQueued = 64 << 20
	// queueWait is how long a Put waits for room in a full queue before
	// it drops the block. Put is called by the block reader's fetches after
	// their readers have the block, so waiting slows the fetches of a
	// stream faster than the disk (as a synchronous write did) rather than
	// any reader, and keeps the cache whole; a disk that stalls costs
	// at most this per block, then blocks are dropped and counted.
	queueWait = 2 * time.Second
	// maxBatch bounds the blocks renamed under one hold of the lock, so
	// that other processes sharing the directory get their turn.
	maxBatch = 32
)

// pending is a block accepted by Put and not yet written: seq is its place
// in the order of Puts.
type pending struct {
	k    Key
	size int64 // the member's
	b    []byte
	blk  *pool.Block // nil, or the pool block b belongs to: the queue holds a reference until the writer is done with it
	seq  uint64
}

// queuedBlock returns the bytes of k's block if a Put queued it and it is
// not written yet.
func (d *Disk) queuedBlock(k Key) ([]byte, bool) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if p, ok := d.queued[k]; ok {
		return p.b, true
	}
	return nil, false
}

// copyQueued copies k's queued block, if there is one of dst's length,
// into dst.
func (d *Disk) copyQueued(k Key, dst []byte) bool {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if p, ok := d.queued[k]; ok && len(p.b) == len(dst) {
		copy(dst, p.b)
		return true
	}
	return false
}

// unref releases the queue's reference to blk, if any.
func unref(blk *pool.Block) {
	if blk != nil {
		blk.Release(pool.DiskQueue)
	}
}

// enqueue queues b as k's block for the writer, waiting up to queueWait
// for room; a blk given holds the queue's reference to b, which enqueue
// releases unless it queues b. It reports false when the queue stays full or is closed; a block already queued counts as queued.
func (d *Disk) enqueue(k Key, size int64, b []byte, blk *pool.Block) bool {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if _, ok := d.queued[k]; ok {
		unref(blk)
		return true
	}
	if d.qbytes+int64(len(b)) > maxQueued && !d.closing {
		// timedOut is set under wmu by the timer that wakes this wait, so
		// the loop cannot miss the one wakeup it gets (a deadline compared
		// with the clock could still be ahead when the timer fires).
		timedOut := false
		wake := time.AfterFunc(d.queueWait, func() {
			d.wmu.Lock()
			timedOut = true
			d.wcond.Broadcast()
			d.wmu.Unlock()
		})
		defer wake.Stop()
		for d.qbytes+int64(len(b)) > maxQueued && !d.closing && !timedOut {
			d.wcond.Wait()
		}
		if _, ok := d.queued[k]; ok {
			unref(blk)
			return true // another Put queued it meanwhile
		}
	}
	if d.closing || d.qbytes+int64(len(b)) > maxQueued {
		unref(blk)
		return false
	}
	if d.queued == nil {
		d.queued = make(map[Key]*pending)
		d.writerDone = make(chan struct{})
		go d.writer()
	}
	d.enq++
	p := &pending{k: k, size: size, b: b, blk: blk, seq: d.enq}
	d.queued[k] = p
	d.fifo = append(d.fifo, p)
	d.qbytes += int64(len(b))
	d.wcond.Broadcast()
	return true
}

// unqueue forgets k's queued block, if any (Remove).
func (d *Disk) unqueue(k Key) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if p, ok := d.queued[k]; ok {
		delete(d.queued, k)
		d.qbytes -= int64(len(p.b))
	}
}

// unqueueMember forgets the queued blocks of the member dg (RemoveMember).
func (d *Disk) unqueueMember(dg b3.Sum) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	for k, p := range d.queued {
		if k.Digest == dg {
			delete(d.queued, k)
			d.qbytes -= int64(len(p.b))
		}
	}
}

// stillQueued reports whether p is still k's queued block: not removed,
// nor replaced by a later Put. The writer writes only those.
func (d *Disk) stillQueued(p *pending) bool {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return d.queued[p.k] == p
}

// Flush returns once every Put that returned before it has reached the
// directory (or failed, or was dropped).
func (d *Disk) Flush() {
	if d == nil {
		return
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	for target := d.enq; d.done < target; {
		d.wcond.Wait()
	}
}

// stopWriter flushes the queue and stops the writer.
func (d *Disk) stopWriter() {
	d.wmu.Lock()
	d.closing = true
	done := d.writerDone
	d.wcond.Broadcast()
	d.wmu.Unlock()
	if done != nil {
		<-done
	}
}

// writer writes queued blocks in batches until the Disk closes.
func (d *Disk) writer() {
	defer close(d.writerDone)
	for {
		d.wmu.Lock()
		for len(d.fifo) == 0 && !d.closing {
			d.wcond.Wait()
		}
		if len(d.fifo) == 0 {
			d.wmu.Unlock()
			return
		}
		n := min(len(d.fifo), maxBatch)
		batch := make([]*pending, n)
		copy(batch, d.fifo)
		d.fifo = append(d.fifo[:0], d.fifo[n:]...)
		d.wmu.Unlock()

		if d.beforeBatch != nil {
			d.beforeBatch()
		}
		d.writeBatch(batch)

		d.wmu.Lock()
		for _, p := range batch {
			if d.queued[p.k] == p {
				delete(d.queued, p.k)
				d.qbytes -= int64(len(p.b))
			}
		}
		// Every block queued passes through the fifo once, also one
		// unqueued (removed) or replaced meanwhile: its reference goes
		// back here, once the map no longer finds it and before Flush
		// returns, so that a Reader's Close finds its slots free.
		for _, p := range batch {
			if p.blk != nil {
				p.blk.Release(pool.DiskQueue)
				p.blk = nil
			}
		}
		d.done = batch[n-1].seq
		d.wcond.Broadcast()
		d.wmu.Unlock()
	}
}

// writeBatch writes the blocks of batch that are not in the directory
// yet: members of one block to unnamed or temporary files (diskfile.go),
// named under one hold of the directory's lock with the blocks of larger
// members, which go into their partial files (diskpart.go), evicting as
// needed. Failures are counted and logged once, as a synchronous Put's
// were.
func (d *Disk) writeBatch(batch []*pending) {
	if d.lock == nil {
		for _, p := range batch {
			d.writeFailed(p.k, errors.New("the directory cannot be written"))
		}
		return
	}
	files := make([]staged, len(batch))
	var parts [][]*pending // blocks of larger members, by member, in the order of Put
	at := map[b3.Sum]int{}
	for i, p := range batch {
		files[i] = staged{fd: -1}
		if p.size > BlockSize {
			j, ok := at[p.k.Digest]
			if !ok {
				j = len(parts)
				at[p.k.Digest] = j
				parts = append(parts, nil)
			}
			parts[j] = append(parts[j], p)
			continue
		}
		final := d.MemberPath(p.k.Digest)
		if info, err := os.Lstat(final); err == nil && info.Size() == p.size || !d.stillQueued(p) {
			continue // not touched: a whole-member file's times are the open path's
		}
		s, err := d.stage(filepath.Dir(final), p.b)
		if err != nil {
			d.writeFailed(p.k, err)
			continue
		}
		files[i] = s
	}
	// wrote: named and counted; gone: the staged file no longer needs
	// discarding (place consumed it).
	wrote, gone := make([]bool, len(batch)), make([]bool, len(batch))
	err := d.locked(func(t *totals) error {
		for _, ps := range parts {
			failed, err := d.writePartLocked(t, ps)
			for _, p := range failed {
				d.writeFailed(p.k, err)
			}
		}
		for i, p := range batch {
			s := files[i]
			if s.empty() || !d.stillQueued(p) {
				continue
			}
			final := d.MemberPath(p.k.Digest)
			// Another process wrote it meanwhile: nothing to evict room
			// for (link's EEXIST stays the backstop of a race with it).
			if d.wholeLocked(t, final, p.size) {
				continue
			}
			n := int64(len(p.b))
			if !t.ok || t.bytes+n > d.limit {
				if err := d.evictLocked(t, n, d.lowWater()-n, ""); err != nil {
					return err
				}
			}
			placed, err := d.place(s, final, p.b)
			gone[i] = s.fd >= 0 || err == nil
			if err != nil {
				return err
			}
			if placed {
				t.bytes += n
				t.blocks++
				wrote[i] = true
				d.writes.Add(1)
			}
		}
		return nil
	})
	for i, p := range batch {
		if files[i].empty() || wrote[i] {
			continue
		}
		if !gone[i] {
			files[i].discard()
		}
		if err != nil {
			d.writeFailed(p.k, err)
		}
	}
}
