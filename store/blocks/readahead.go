package blocks

import "time"

// maxSeq bounds the number of members whose read pattern is tracked.
const maxSeq = 1024

// seqState tracks the read pattern of one member (by digest): the last
// block the previous read touched, the readahead window, and the highest
// block already prefetched.
type seqState struct {
	last, ahead int64
	window      int64
}

// readahead is called by ReadAt before it reads blocks first..last of m.
// A read that starts in the block where the previous read of the member
// ended, or in the next one, and goes on into a new block is sequential:
// the window doubles (1, 2, 4, ... up to Config.Readahead) and the blocks
// after last up to the window are prefetched in the background, each at
// most once. Any other read resets the window. Readahead flights never
// exceed Config.Readahead at a time; blocks that find no free slot are
// skipped, not queued.
func (r *Reader) readahead(m *Member, first, last int64) {
	if r.cfg.Readahead < 0 {
		return
	}
	r.mu.Lock()
	s := r.seq[m.Digest]
	if s == nil {
		if len(r.seq) >= maxSeq {
			for d := range r.seq {
				delete(r.seq, d)
				break
			}
		}
		s = &seqState{last: -1, ahead: -1} // a read from block 0 counts as sequential
		r.seq[m.Digest] = s
	}
	prev := s.last
	s.last = last
	switch {
	case (first == prev || first == prev+1) && last > prev:
		s.window = min(max(1, 2*s.window), int64(r.cfg.Readahead))
	case first == prev && last == prev:
		r.mu.Unlock()
		return // still in the same block: its readahead was started already
	default:
		s.window = 0
		s.ahead = last
	}
	from := max(last+1, s.ahead+1)
	to := min(last+s.window, numBlocks(m.Size)-1)
	r.mu.Unlock()

	deadline := time.Now().Add(r.cfg.ReadTimeout)
	for i := from; i <= to; {
		f, end := r.startSpan(m, i, from, true, deadline)
		if f == nil {
			break
		}
		i = end + 1
		r.mu.Lock()
		s.ahead = max(s.ahead, end)
		r.mu.Unlock()
	}
}

// sequential reports whether m is being read sequentially (its readahead
// window is open), so that a missing block is fetched as part of a span.
func (r *Reader) sequential(m *Member) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.seq[m.Digest]
	return s != nil && s.window > 0
}
