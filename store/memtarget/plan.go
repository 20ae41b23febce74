package memtarget

import (
	"fmt"

	"github.com/pinfs/pinfs/store/blocks"
)

// Request is what a command knows when it sizes its memory: its flags
// and what it needs on the heap.
type Request struct {
	// Target is --memory-target; 0 when it was not given.
	Target int64
	// Heap is what the process needs on the Go heap beside the pool.
	Heap int64
	// Mem and Readahead are the values of --cache-mem and
	// --readahead-budget (their defaults when not given); MemSet and
	// ReadaheadSet say whether they were given.
	Mem, Readahead       int64
	MemSet, ReadaheadSet bool
	// Self and Root are the cgroup files FromCgroup reads; "" means
	// SelfCgroup and CgroupRoot. NoCgroup leaves the cgroup unread: a
	// process that holds several mounts (pinfs derive's inputs) does not
	// give each the whole cgroup.
	Self, Root string
	NoCgroup   bool
}

// Plan returns the sizes of r. The target is r.Target when given (Source
// "flag"); else CgroupShare percent of the limit of the cgroup that limits
// the process (Source SourceV2 or SourceV1), unless r.NoCgroup; else the
// old defaults
// (Source "default"): Heap + Mem + Readahead + blocks.PoolReserve, shared
// as they say. --cache-mem and --readahead-budget given explicitly win
// for their part (Sizes.Override). A cgroup whose limit could not be read
// leaves the default, and Sizes.Unread says why.
func Plan(r Request) (Sizes, error) {
	self, root := r.Self, r.Root
	if self == "" {
		self = SelfCgroup
	}
	if root == "" {
		root = CgroupRoot
	}
	target, source := r.Target, "flag"
	var limit int64
	var unread error
	if target <= 0 && !r.NoCgroup {
		l, src, ok, err := FromCgroup(self, root)
		switch {
		case err != nil:
			unread = err
		case ok:
			limit, source = l, src
			target = l / 100 * CgroupShare
		}
	}
	if target <= 0 {
		pool := max(r.Mem, 0) + r.Readahead + blocks.PoolReserve
		heap := max(r.Heap, 0)
		return Sizes{Target: heap + pool, Source: "default", Heap: heap, Pool: pool, Mem: max(r.Mem, 0),
			Readahead: r.Readahead, Reserve: blocks.PoolReserve, Unread: unread}, nil
	}
	s, err := Split(target, r.Heap)
	if err != nil {
		if source != "flag" {
			return Sizes{}, fmt.Errorf("%s %s: %d%% of it is too small: %w; raise the limit or pass --memory-target",
				source, Size(limit), CgroupShare, err)
		}
		return Sizes{}, fmt.Errorf("--memory-target: %w", err)
	}
	s.Source, s.Limit = source, limit
	return s.Override(r.Mem, r.MemSet, r.Readahead, r.ReadaheadSet), nil
}
