// Package memtarget decides what memory a mount may use, and how that
// memory is shared: one target, read from the --memory-target flag, from
// the cgroup that limits the process (cgroup v2 memory.max, cgroup v1
// memory.limit_in_bytes), or from the defaults of the old flags, split
// into the Go heap the process needs beside its blocks and the block pool
// (store/pool), and the pool into the memory tier, the readahead budget
// and a reserve for the blocks of fetches in flight, of replies the
// kernel has not taken yet and of the disk tier's write-behind queue.
//
// It only computes sizes: the caller makes the pool and the block reader
// from them.
package memtarget
