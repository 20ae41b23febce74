package blocks

import "testing"

func TestSeqAdvance(t *testing.T) {
	type read struct{ first, last, from, to, window int64 }
	for _, c := range []struct {
		name    string
		nblocks int64 // 12 if 0
		reads   []read
	}{
		{"sequential from 0: the window doubles up to the limit", 0, []read{
			{0, 0, 1, 1, 1}, {1, 1, 2, 3, 2}, {2, 2, 4, 6, 4}, {3, 3, 7, 7, 4}, {4, 5, 8, 9, 4},
		}},
		{"reads within one block start nothing new", 0, []read{
			{0, 0, 1, 1, 1}, {0, 0, 0, -1, 1}, {0, 0, 0, -1, 1}, {1, 1, 2, 3, 2},
		}},
		{"a jump closes the window; sequential reads after it open it again", 100, []read{
			{0, 0, 1, 1, 1}, {30, 30, 31, 30, 0}, {31, 31, 32, 32, 1}, {32, 32, 33, 34, 2},
		}},
		{"a read going backwards beyond the reorder slack closes the window", 100, []read{
			{0, 0, 1, 1, 1}, {1, 1, 2, 3, 2}, {2, 2, 4, 6, 4}, {3, 3, 7, 7, 4}, {4, 20, 21, 24, 4}, {0, 0, 1, 0, 0},
		}},
		{"a small window already tolerates the kernel's reordering", 100, []read{
			{0, 0, 1, 1, 1}, {5, 5, 6, 7, 2}, {1, 1, 0, -1, 2}, {2, 2, 0, -1, 2}, {6, 6, 8, 10, 4},
		}},
		{"reads of an open stream arriving out of order keep the window", 0, []read{
			{0, 0, 1, 1, 1}, {1, 1, 2, 3, 2}, {2, 2, 4, 6, 4}, {4, 4, 7, 8, 4}, {3, 3, 0, -1, 4}, {5, 5, 9, 9, 4},
		}},
		{"a read ahead of the stream within the slack counts as sequential", 0, []read{
			{0, 0, 1, 1, 1}, {1, 1, 2, 3, 2}, {2, 2, 4, 6, 4}, {5, 5, 7, 9, 4}, {3, 3, 0, -1, 4}, {4, 4, 0, -1, 4},
		}},
		{"a read beyond the slack is a jump", 100, []read{
			{0, 0, 1, 1, 1}, {1, 1, 2, 3, 2}, {2, 2, 4, 6, 4}, {20, 20, 21, 20, 0}, {21, 21, 22, 22, 1},
		}},
		{"a read behind the slack is a jump", 100, []read{
			{0, 0, 1, 1, 1}, {1, 1, 2, 3, 2}, {2, 2, 4, 6, 4}, {3, 3, 7, 7, 4}, {4, 20, 21, 24, 4}, {3, 3, 4, 3, 0},
		}},
		{"the window stops at the last block", 0, []read{
			{0, 0, 1, 1, 1}, {1, 1, 2, 3, 2}, {2, 2, 4, 6, 4}, {3, 10, 11, 11, 4},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := c.nblocks
			if n == 0 {
				n = 12
			}
			s := newSeq()
			for k, rd := range c.reads {
				from, to := s.advance(rd.first, rd.last, n, 4)
				if from <= to {
					s.covered(to)
				}
				if (from <= to || rd.from <= rd.to) && (from != rd.from || to != rd.to) || s.window != rd.window {
					t.Fatalf("read %d (%d..%d): readahead %d..%d, window %d; want %d..%d, window %d",
						k, rd.first, rd.last, from, to, s.window, rd.from, rd.to, rd.window)
				}
			}
		})
	}
	var none *seqState
	if none.sequential() {
		t.Fatal("an untracked member is sequential")
	}
}

func TestRunBounds(t *testing.T) {
	for _, c := range []struct{ i, span, nblocks, from, lo, hi int64 }{
		{0, 8, 100, 0, 0, 7},
		{5, 8, 100, 0, 0, 7},
		{8, 8, 100, 0, 8, 15},
		{13, 8, 100, 11, 11, 15}, // readahead from block 11: not before it
		{13, 8, 100, 20, 13, 15}, // a from beyond i does not cut i out
		{97, 8, 100, 0, 96, 99},  // the member ends first
		{5, 1, 100, 0, 5, 5},     // no runs
		{0, 8, 1, 0, 0, 0},
	} {
		if lo, hi := runBounds(c.i, c.span, c.nblocks, c.from); lo != c.lo || hi != c.hi {
			t.Errorf("runBounds(%d, span %d, %d blocks, from %d) = %d..%d, want %d..%d",
				c.i, c.span, c.nblocks, c.from, lo, hi, c.lo, c.hi)
		}
	}
}

func TestPutOnDisk(t *testing.T) {
	for _, c := range []struct {
		seq         bool
		size, limit int64
		want        bool
	}{
		{false, 10 << 30, 1 << 30, true}, // a random read of a large member
		{true, 10 << 30, 1 << 30, false}, // a stream larger than the budget
		{true, 1 << 30, 1 << 30, true},   // a stream that fits
		{true, 100, 0, false},            // no disk tier
		{false, 100, 0, false},
	} {
		if got := putOnDisk(c.seq, c.size, c.limit); got != c.want {
			t.Errorf("putOnDisk(sequential %v, size %d, limit %d) = %v, want %v", c.seq, c.size, c.limit, got, c.want)
		}
	}
}
