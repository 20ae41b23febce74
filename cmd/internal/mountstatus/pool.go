package mountstatus

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/pinfs/pinfs/store/pool"
)

// Pool is the mount's block pool (store/pool): its Slots of SlotBytes,
// those Free, the references held by each holder (InUse: a slot shared by
// the memory tier and a reply counts under both), the Gets that waited
// for a free slot (Waits), how long they waited in all (WaitSeconds), and
// those whose read ran out of time first (Timeouts).
type Pool struct {
	Slots       int              `json:"slots"`
	Free        int              `json:"free"`
	SlotBytes   int              `json:"slot_bytes"`
	InUse       map[string]int64 `json:"in_use"`
	Waits       int64            `json:"waits"`
	WaitSeconds float64          `json:"wait_seconds"`
	Timeouts    int64            `json:"timeouts"`
}

// PoolSource is what a Pool is read from (*pool.Pool satisfies it).
type PoolSource interface{ Stats() pool.Stats }

// PoolOf returns the Source.Pool of a mount whose blocks live in p; nil
// when p is nil (the status then has no pool).
func PoolOf(p *pool.Pool) func() Pool {
	if p == nil {
		return nil
	}
	return poolOf(p)
}

func poolOf(src PoolSource) func() Pool {
	return func() Pool {
		s := src.Stats()
		return Pool{Slots: s.Slots, Free: s.Free, SlotBytes: s.SlotSize, InUse: s.InUse, Waits: s.Waits,
			WaitSeconds: s.WaitTime.Seconds(), Timeouts: s.Timeouts}
	}
}

// writeText writes p's line of the text status: the holders with
// references, in the read path's order.
func (p *Pool) writeText(w io.Writer) error {
	var held []string
	for _, h := range pool.Holders() {
		if n := p.InUse[h.String()]; n != 0 {
			held = append(held, fmt.Sprintf("%s %d", h, n))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.InUse)) { // holders this build does not know
		if n := p.InUse[name]; !known(name) && n != 0 {
			held = append(held, fmt.Sprintf("%s %d", name, n))
		}
	}
	inUse := "none"
	if len(held) > 0 {
		inUse = strings.Join(held, ", ")
	}
	_, err := fmt.Fprintf(w, "  pool: %d of %d slots free (%d MiB each); in use: %s; waits %d (%.3f s), timeouts %d\n",
		p.Free, p.Slots, p.SlotBytes>>20, inUse, p.Waits, p.WaitSeconds, p.Timeouts)
	return err
}

func known(name string) bool {
	for _, h := range pool.Holders() {
		if h.String() == name {
			return true
		}
	}
	return false
}
