package admission

import (
	"context"
	"fmt"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/gate"
)

// Fences is what a gate imposes on validation, read from its current
// record: the fence values a manifest must have been built at (at least),
// and the members it must not contain. Validate takes nil when no gate
// applies (no --alias, or the gate does not exist yet).
type Fences struct {
	Gate               string
	Generation         int64
	TombstoneWatermark int64
	BenchmarkFence     int64
	Revoked            map[string]bool // member ids and "blake3:<hex>" digests from every revocation list
	Benchmark          map[string]bool // member ids and digests from every benchmark list
}

// LoadFences returns the fences of gate record r, reading every
// revocation and benchmark list it references (each verified against its
// digest by gate.GetList).
func LoadFences(ctx context.Context, st store.Blobs, r *gate.Record) (*Fences, error) {
	f := &Fences{
		Gate: r.Name, Generation: r.Generation,
		TombstoneWatermark: r.TombstoneWatermark, BenchmarkFence: r.BenchmarkFence,
		Revoked: map[string]bool{}, Benchmark: map[string]bool{},
	}
	for _, l := range []struct {
		what  string
		lists []gate.Fenced
		into  map[string]bool
	}{{"revocation", r.Revocations, f.Revoked}, {"benchmark", r.Benchmarks, f.Benchmark}} {
		for _, fl := range l.lists {
			entries, err := gate.GetList(ctx, st, fl.List)
			if err != nil {
				return nil, fmt.Errorf("gate %s: %s list %s (at %d): %w", r.Name, l.what, fl.List, fl.At, err)
			}
			for _, e := range entries {
				l.into[e] = true
			}
		}
	}
	return f, nil
}
