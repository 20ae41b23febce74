package memtarget

import (
	"fmt"

	"github.com/pinfs/pinfs/store/blocks"
)

// MinPool is the least pool a target may leave: Split refuses a target
// that leaves less beside the heap.
const MinPool = 32 << 20

// minReserve is the least reserve of a pool: the blocks of a few misses
// in flight and replies the kernel has not taken yet.
const minReserve = 16 << 20

// CgroupShare is the share of a cgroup's limit a target takes, in
// percent. The rest is left to what the cgroup charges beside the
// process's heap and pool: the page cache of the files it reads and
// writes (the disk tier, the local store), kernel memory (sockets, FUSE
// requests, page tables) and the Go runtime's slack above its soft
// limit. Crossing the limit gets the process OOM-killed, so the target
// stays well below it.
const CgroupShare = 80

// Sizes is how a memory target is shared: Pool = Mem + Readahead +
// Reserve, and Heap + Pool is at most Target (less by the rounding of the
// pool to whole blocks, or when Override made the pool smaller; when it
// made it larger, Target grew with it and Over says by how much).
type Sizes struct {
	// Target is the memory the process may use; Source says where it
	// came from (Source* constants, "flag" or "default").
	Target int64
	Source string
	// Limit is the cgroup's limit the target was taken from (0: none),
	// and Unread why the cgroup's limit could not be read (the default
	// target was used then).
	Limit  int64
	Unread error
	// Heap is what the process needs on the Go heap beside the pool:
	// the Go soft memory limit.
	Heap int64
	// Pool is the block pool's size: the memory tier (Mem), the
	// readahead budget (Readahead) and the rest (Reserve).
	Pool, Mem, Readahead, Reserve int64
	// Over is how much the explicit flags (Override) took beyond the
	// target they were given with; 0 when they fit.
	Over int64
}

// Split shares target between heap, what the process needs on the Go heap
// beside the pool, and a pool of the rest: in the pool, half (at most
// blocks.DefaultReadaheadBudget) is the readahead budget, an eighth (at
// least 16 MiB, at most blocks.PoolReserve) the reserve, and the rest the
// memory tier. It refuses a target that leaves less than MinPool for the
// pool.
func Split(target, heap int64) (Sizes, error) {
	heap = max(heap, 0)
	pool := target - heap
	if pool < MinPool {
		return Sizes{}, fmt.Errorf("memory target %s leaves %s for block memory beside the %s the process needs on its heap; "+
			"want at least %s: a target of %s or more", Size(target), Size(max(pool, 0)), Size(heap), Size(MinPool), Size(heap+MinPool))
	}
	pool = pool / blocks.BlockSize * blocks.BlockSize // whole slots
	ra := min(pool/2, blocks.DefaultReadaheadBudget) / blocks.BlockSize * blocks.BlockSize
	reserve := min(max(pool/8, minReserve), blocks.PoolReserve) / blocks.BlockSize * blocks.BlockSize
	return Sizes{Target: target, Heap: heap, Pool: pool, Mem: pool - ra - reserve, Readahead: ra, Reserve: reserve}, nil
}

// Override makes the memory tier mem bytes when memSet and the readahead
// budget readahead bytes when raSet (explicit --cache-mem and
// --readahead-budget win for their part) and sizes the pool to hold them
// and the reserve. A target the flags outgrow grows with them; Over says
// by how much.
func (s Sizes) Override(mem int64, memSet bool, readahead int64, raSet bool) Sizes {
	if !memSet && !raSet {
		return s
	}
	if memSet {
		s.Mem = max(mem, 0)
	}
	if raSet {
		s.Readahead = readahead
	}
	s.Pool = s.Mem + s.Readahead + s.Reserve
	if t := s.Heap + s.Pool; t > s.Target {
		s.Over, s.Target = t-s.Target, t
	}
	return s
}

// Size formats n bytes as the size flags take it: whole MiB or GiB when
// it is one, else bytes.
func Size(n int64) string {
	switch {
	case n != 0 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n != 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dB", n)
}
