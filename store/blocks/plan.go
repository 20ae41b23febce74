package blocks

import "time"

// The plan of a read: which blocks a miss fetches in one request, and how
// far ahead a sequential reader is served. The functions below
// readahead are pure, no I/O; readahead turns the plan into runs
// (startRun, flight.go) within the stream's share of the budget.

// maxSeq bounds the number of members whose read pattern is tracked.
const maxSeq = 1024

// reorder is the most blocks by which the reads of one sequential stream
// may arrive out of order. The kernel reads a FUSE file ahead in requests
// of max_read (1 MiB), many at once (fs: read_ahead_kb 8 MiB, 64
// background requests), and go-fuse serves them on up to 16 goroutines
// (one per core): the Reader may see block 9 before block 8, or 12 after
// 14.
const reorder = 16

// seqState is the read pattern of one member (by digest): the highest
// block of the stream read so far (last), the readahead window in blocks,
// and the highest block readahead has covered.
type seqState struct {
	last, ahead int64
	window      int64
}

// newSeq returns the state of a member not read yet: a first read from
// block 0 counts as sequential.
func newSeq() *seqState { return &seqState{last: -1, ahead: -1} }

// advance records a read of blocks first..last of a member of nblocks
// blocks and returns the blocks to read ahead, from..to (none if from >
// to). A read that starts in the stream's last block or the next one and
// goes on into a new block is sequential: the window doubles (1, 2, 4, ...
// up to limit) and the blocks after last within the window that readahead
// has not covered yet are returned. Once the window is open, reads within
// reorder blocks of the last one are of the same stream arriving out of
// order, however small the window still is (the kernel's first readahead
// reaches 8 blocks ahead at once, while the window is 1): one that starts that far
// ahead still counts as sequential, one that stays behind or in the last
// block changes nothing. Any other read is a jump: it closes the window,
// and the stream starts again from it at one block.
func (s *seqState) advance(first, last, nblocks, limit int64) (from, to int64) {
	head := s.last
	slack := int64(0)
	if s.window > 0 {
		slack = reorder
	}
	switch {
	case last > head && first >= head-slack && first <= head+1+slack:
		s.last = last
		s.window = min(max(1, 2*s.window), limit)
	case last <= head && first >= head-slack:
		return 0, -1 // behind the stream, or in its last block: readahead was started already
	default:
		s.last = last
		s.window = 0
		s.ahead = last
	}
	return max(last+1, s.ahead+1), min(last+s.window, nblocks-1)
}

// sequential reports whether the window is open: a miss then fetches a run
// of blocks rather than one.
func (s *seqState) sequential() bool { return s != nil && s.window > 0 }

// runBounds returns the blocks a run that must contain block i may cover:
// i's group of span aligned blocks, within the member's nblocks blocks and
// not before from. Concurrent reads of one group (the kernel sends a
// sequential reader's readahead in parallel) then share one request
// instead of splitting it. span <= 1 gives i alone.
func runBounds(i, span, nblocks, from int64) (lo, hi int64) {
	if span <= 1 {
		return i, i
	}
	group := i - i%span
	return max(group, min(from, i)), min(group+span, nblocks) - 1
}

// putOnDisk reports whether the blocks of a run go to the disk tier. A
// sequential stream of a member larger than the tier's whole budget would
// only push out everything else and then itself, so its blocks are kept
// in memory alone; everything else is put (the tier refuses what does not
// fit). limit is the tier's budget (0: disabled, nothing to put).
func putOnDisk(sequential bool, size, limit int64) bool {
	return limit > 0 && !(sequential && size > limit)
}

// blockRange returns the byte range of block i of m.
func blockRange(m *Member, i int64) (off, n int64) {
	off = i * BlockSize
	return off, min(BlockSize, m.Size-off)
}

// numBlocks returns the number of blocks of a member of size bytes.
func numBlocks(size int64) int64 { return (size + BlockSize - 1) / BlockSize }

// covered records that readahead has started the blocks up to end.
func (s *seqState) covered(end int64) { s.ahead = max(s.ahead, end) }

// readahead is called by a read of blocks first..last of m before it
// loads them. If the read is sequential (seqState.advance) it starts runs
// of up to Config.SpanBlocks blocks over the blocks ahead, in parallel,
// each at most once. A run that finds no room in the budget is skipped,
// not queued, and so are the runs after it: the next read asks for them
// again.
func (r *Reader) readahead(m *Member, first, last int64) {
	limit := r.cfg.aheadBlocks()
	if limit == 0 {
		return
	}
	nb := numBlocks(m.Size)
	r.mu.Lock()
	s, ok := r.seq.Get(m.Digest)
	if !ok {
		s = newSeq()
		r.seq.Put(m.Digest, s)
	}
	open := s.window > 0
	from, to := s.advance(first, last, nb, limit)
	window := s.window
	if w := s.window * BlockSize; w > r.st.windowMax.Load() {
		r.st.windowMax.Store(w)
	}
	if open && s.window == 0 {
		r.st.aheadResets.Add(1)
	}
	r.mu.Unlock()
	disk := putOnDisk(true, m.Size, r.disk.Limit())
	// Runs no larger than the stream's fair share of the budget, so that
	// many streams each keep some room ahead (budget.go).
	span := int64(r.cfg.SpanBlocks)
	if from <= to {
		span = min(span, max(r.budget.share(m.Digest)/BlockSize, 1))
	}
	for i := from; i <= to; {
		lo, hi := runBounds(i, span, nb, from)
		// The budget keeps the blocks of the window; the rest of a part
		// asked for while the window is smaller than one (the first
		// reads, or a reader of a header: file(1), a format sniffer) it
		// keeps loosely, giving their room to the first run that needs it.
		hold := hi
		if window < span {
			hold = min(hi, to)
		}
		cs, first, _ := r.startRun(m, i, lo, hi, hold, runAhead, disk, time.Time{})
		if cs == nil {
			r.st.aheadSkipped.Add(1)
			return
		}
		i = first + int64(len(cs))
		r.mu.Lock()
		s.covered(i - 1)
		r.mu.Unlock()
	}
}

// sequential reports whether m is being read sequentially.
func (r *Reader) sequential(m *Member) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, _ := r.seq.Get(m.Digest)
	return s.sequential()
}
