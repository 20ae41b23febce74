package admission

import (
	"context"
	"fmt"
	"strings"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/gate"
	"github.com/pinfs/pinfs/verify"
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
// digest, and its entries checked, by gate.GetList: a digest entry is
// canonical, so it matches a member's digest exactly).
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

// Hits reports whether member m, by its id or its digest, is revoked or
// fenced as benchmark data.
func (f *Fences) Hits(m *verify.Member) (revoked, benchmark bool) {
	return f.Revoked[m.ID] || f.Revoked[m.Digest], f.Benchmark[m.ID] || f.Benchmark[m.Digest]
}

// namedInError is how many members an error names before "and N more".
const namedInError = 10

// Check returns an error wrapping ErrFenced that names the first members
// of t that are revoked or fenced as benchmark data, or nil.
func (f *Fences) Check(t *verify.Table) error {
	var named []string
	n := 0
	for i := range t.Len() {
		m := t.Member(i)
		revoked, benchmark := f.Hits(&m)
		if !revoked && !benchmark {
			continue
		}
		if n++; len(named) < namedInError {
			what := "revoked"
			if !revoked {
				what = "benchmark data"
			}
			named = append(named, verify.Printable(m.ID)+" ("+what+")")
		}
	}
	if n == 0 {
		return nil
	}
	more := ""
	if n > len(named) {
		more = fmt.Sprintf(" and %d more", n-len(named))
	}
	return fmt.Errorf("gate %s fences out %d members: %s%s: %w", f.Gate, n, strings.Join(named, ", "), more, ErrFenced)
}
