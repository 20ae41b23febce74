package memtarget

import (
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store/blocks"
)

// checkShares fails unless s holds the invariants of a split: the pool's
// parts add up to it, in whole blocks, and heap and pool fit the target.
func checkShares(t *testing.T, s Sizes) {
	t.Helper()
	if s.Mem+s.Readahead+s.Reserve != s.Pool {
		t.Errorf("mem %d + readahead %d + reserve %d = %d, pool %d", s.Mem, s.Readahead, s.Reserve, s.Mem+s.Readahead+s.Reserve, s.Pool)
	}
	for name, v := range map[string]int64{"pool": s.Pool, "mem": s.Mem, "readahead": s.Readahead, "reserve": s.Reserve} {
		if v < 0 || v%blocks.BlockSize != 0 {
			t.Errorf("%s %d: want whole blocks, not negative", name, v)
		}
	}
	if s.Heap+s.Pool > s.Target {
		t.Errorf("heap %d + pool %d = %d, above the target %d", s.Heap, s.Pool, s.Heap+s.Pool, s.Target)
	}
}

func TestSplit(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name                          string
		target, heap                  int64
		pool, mem, readahead, reserve int64
	}{
		// A 2 GiB sidecar: 80 % is 1638.4 MiB; docs/mount.md works it out.
		{"2 GiB cgroup's target", 2 << 30 / 100 * CgroupShare, 200 * mib, 1438 * mib, 1054 * mib, 256 * mib, 128 * mib},
		{"small: reserve at least 16 MiB", 200 * mib, 100 * mib, 100 * mib, 34 * mib, 50 * mib, 16 * mib},
		{"the least pool", 132 * mib, 100 * mib, 32 * mib, 0, 16 * mib, 16 * mib},
		{"mid: an eighth", 612 * mib, 100 * mib, 512 * mib, 192 * mib, 256 * mib, 64 * mib},
		{"large: caps", 16<<30 + 100*mib, 100 * mib, 16 << 30, 16<<30 - 384*mib, 256 * mib, 128 * mib},
		{"rounded down to whole blocks", 300*mib + 12345, 100 * mib, 200 * mib, 75 * mib, 100 * mib, 25 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Split(tc.target, tc.heap)
			if err != nil {
				t.Fatal(err)
			}
			checkShares(t, s)
			if s.Pool != tc.pool || s.Mem != tc.mem || s.Readahead != tc.readahead || s.Reserve != tc.reserve {
				t.Errorf("Split(%d, %d) = pool %d mem %d readahead %d reserve %d MiB; want %d %d %d %d", tc.target, tc.heap,
					s.Pool/mib, s.Mem/mib, s.Readahead/mib, s.Reserve/mib, tc.pool/mib, tc.mem/mib, tc.readahead/mib, tc.reserve/mib)
			}
			if s.Heap != tc.heap || s.Target != tc.target {
				t.Errorf("Split kept heap %d target %d; want %d %d", s.Heap, s.Target, tc.heap, tc.target)
			}
		})
	}
}

// TestSplitInvariants runs Split over a sweep of targets and heaps.
func TestSplitInvariants(t *testing.T) {
	for target := int64(MinPool); target < 64<<30; target = target*9/8 + 12345 {
		for _, heap := range []int64{0, 1 << 20, 97<<20 + 3, 1 << 30} {
			s, err := Split(target, heap)
			if target-heap < MinPool {
				if err == nil {
					t.Fatalf("Split(%d, %d) = %+v; want a refusal", target, heap, s)
				}
				continue
			}
			if err != nil {
				t.Fatalf("Split(%d, %d): %v", target, heap, err)
			}
			checkShares(t, s)
			if s.Readahead > blocks.DefaultReadaheadBudget || s.Reserve > blocks.PoolReserve || s.Reserve < minReserve {
				t.Fatalf("Split(%d, %d) = %+v: readahead or reserve out of bounds", target, heap, s)
			}
			if t.Failed() {
				t.Fatalf("Split(%d, %d) = %+v", target, heap, s)
			}
		}
	}
}

func TestSplitRefuses(t *testing.T) {
	for _, tc := range []struct{ target, heap int64 }{
		{100 << 20, 80 << 20}, // 20 MiB left
		{64 << 20, 100 << 20}, // less than the heap
		{0, 0},
	} {
		s, err := Split(tc.target, tc.heap)
		if err == nil {
			t.Errorf("Split(%d, %d) = %+v; want a refusal", tc.target, tc.heap, s)
			continue
		}
		// The message says what target would do.
		if want := Size(max(tc.heap, 0) + MinPool); !strings.Contains(err.Error(), want) {
			t.Errorf("Split(%d, %d): %v; want it to name the least target %s", tc.target, tc.heap, err, want)
		}
	}
}

func TestOverride(t *testing.T) {
	base, err := Split(1<<30, 100<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got := base.Override(1, false, 2, false); got != base {
		t.Errorf("Override with no flag given changed %+v to %+v", base, got)
	}
	for _, tc := range []struct {
		name                 string
		mem                  int64
		memSet               bool
		ra                   int64
		raSet                bool
		wantMem, wantRA      int64
		wantOver, wantTarget int64
	}{
		{"cache-mem smaller", 64 << 20, true, 0, false, 64 << 20, base.Readahead, 0, base.Target},
		{"cache-mem 0", 0, true, 0, false, 0, base.Readahead, 0, base.Target},
		{"readahead smaller", 0, false, 32 << 20, true, base.Mem, 32 << 20, 0, base.Target},
		{"both larger: the target grows", 2 << 30, true, 512 << 20, true, 2 << 30, 512 << 20,
			100<<20 + 2<<30 + 512<<20 + base.Reserve - 1<<30, 100<<20 + 2<<30 + 512<<20 + base.Reserve},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base.Override(tc.mem, tc.memSet, tc.ra, tc.raSet)
			if s.Mem != tc.wantMem || s.Readahead != tc.wantRA || s.Reserve != base.Reserve {
				t.Errorf("mem %d readahead %d reserve %d; want %d %d %d", s.Mem, s.Readahead, s.Reserve, tc.wantMem, tc.wantRA, base.Reserve)
			}
			if s.Pool != s.Mem+s.Readahead+s.Reserve {
				t.Errorf("pool %d, want mem + readahead + reserve %d", s.Pool, s.Mem+s.Readahead+s.Reserve)
			}
			if s.Over != tc.wantOver || s.Target != tc.wantTarget {
				t.Errorf("over %d target %d; want %d %d", s.Over, s.Target, tc.wantOver, tc.wantTarget)
			}
			if s.Heap+s.Pool > s.Target {
				t.Errorf("heap %d + pool %d above the target %d", s.Heap, s.Pool, s.Target)
			}
		})
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1 << 20: "1MiB", 3 << 30: "3GiB", 1536 << 20: "1536MiB", 1000: "1000B"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
