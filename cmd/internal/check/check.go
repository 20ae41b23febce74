// Package check implements `pinfs verify`: the two levels of seed 004.
// The first level checks the manifest, the member table and the presence
// of every pinned version with its size (a HEAD with the version id); the
// second (deep) re-reads every member at its version and compares digests
// and Bao outboards.
package check

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// Options select what Run checks.
type Options struct {
	Deep   bool // re-read and re-hash every member
	NoHead bool // skip the per-member HEAD (structure only)
	Jobs   int  // members checked in parallel; <= 0 means 16
	// Hash, when set, names members (by table index) to re-read and
	// re-hash even without Deep; the others get the HEAD.
	Hash func(i int) bool
	// Meta, when set, is what Run reads the manifest and member table
	// from (a metacache.Cache over the store: its verified copies and
	// index); the members' objects are always checked in the store.
	Meta verify.Getter
}

// Report is the outcome of a check. It marshals to the JSON that
// `pinfs verify --json` prints.
type Report struct {
	Snapshot verify.Digest    `json:"snapshot"`
	OK       bool             `json:"ok"`
	Error    string           `json:"error,omitempty"` // the manifest or table itself failed
	Deep     bool             `json:"deep"`
	Members  int              `json:"members"`
	Bytes    int64            `json:"bytes"`
	Counts   map[string]int   `json:"counts"` // problems by kind, every kind present
	Problems []verify.Problem `json:"problems"`
	Checked  int              `json:"checkedVersions"` // members whose version was checked in the store
}

// Kinds are the problem kinds a report counts, in report order.
var Kinds = []string{
	verify.KindMissing, verify.KindSizeMismatch, verify.KindMismatch,
	verify.KindDuplicateID, verify.KindUnsafePath, verify.KindUnversioned,
	verify.KindBadMember, verify.KindReadFailed,
}

// Run checks snapshot d in st. It returns an error only when the check
// could not run at all (for example the context ended); everything that
// is wrong with the snapshot is in the report.
func Run(ctx context.Context, st store.Store, d verify.Digest, o Options) (*Report, error) {
	var g verify.Getter = st
	if o.Meta != nil {
		g = o.Meta
	}
	c, err := verify.Fetch(ctx, g, d)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r := newReport(d, o)
		r.Error = err.Error()
		return r, nil
	}
	return Fetched(ctx, st, c, o)
}

// newReport returns an empty report of snapshot d with every kind counted.
func newReport(d verify.Digest, o Options) *Report {
	r := &Report{Snapshot: d, Deep: o.Deep, Counts: map[string]int{}, Problems: []verify.Problem{}}
	for _, k := range Kinds {
		r.Counts[k] = 0
	}
	return r
}

// Fetched is Run for a snapshot its caller fetched already (verify.Fetch),
// so that the manifest and member table are read and parsed once.
func Fetched(ctx context.Context, st store.Store, c *verify.Checked, o Options) (*Report, error) {
	r := newReport(c.Manifest.SnapshotID, o)
	r.Members = c.Table.Len()
	r.Bytes = c.Manifest.Members.Bytes
	r.Problems = append(r.Problems, c.Problems...)
	if !o.NoHead || o.Deep || o.Hash != nil {
		ps, n, err := checkObjects(ctx, st, c.Table, o)
		if err != nil {
			return nil, err
		}
		r.Problems = append(r.Problems, ps...)
		r.Checked = n
	}
	for _, p := range r.Problems {
		r.Counts[p.Kind]++
	}
	r.OK = len(r.Problems) == 0
	return r, nil
}

// checkObjects checks every member's object in parallel and returns the
// problems in member order and how many members were checked. A member
// whose source is malformed is left to the structural problems Fetched
// already has (CheckMembers names it), so it is not reported twice.
func checkObjects(ctx context.Context, st store.Store, ms *verify.Table, o Options) ([]verify.Problem, int, error) {
	all := make([]int, ms.Len())
	for i := range all {
		all[i] = i
	}
	ps, err := Members(ctx, st, ms, all, o, nil)
	if err != nil {
		return nil, 0, err
	}
	return slices.DeleteFunc(ps, func(p verify.Problem) bool { return p.Kind == verify.KindBadMember }), ms.Len(), nil
}

// checkOne checks one member; nil means it passed.
func checkOne(ctx context.Context, st store.Store, m *verify.Member, deep bool) *verify.Problem {
	fail := func(kind, format string, a ...any) *verify.Problem {
		return &verify.Problem{Kind: kind, Path: m.Path, ID: m.ID, Detail: fmt.Sprintf(format, a...)}
	}
	obj, err := m.Object()
	if err != nil {
		return fail(verify.KindBadMember, "no object to read: %v", err)
	}
	info, err := st.Stat(ctx, obj)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fail(verify.KindMissing, "%v is gone", obj)
	case err != nil:
		return fail(verify.KindReadFailed, "%v", err)
	case info.Size != m.Size:
		return fail(verify.KindSizeMismatch, "%v has %d bytes, pinned %d", obj, info.Size, m.Size)
	case !deep:
		return nil
	}
	rc, err := st.ReadRange(ctx, obj, 0, -1)
	if err != nil {
		return fail(verify.KindReadFailed, "%v", err)
	}
	sum, outboard, err := b3.Encode(rc, m.Size)
	rc.Close()
	if err != nil {
		return fail(verify.KindReadFailed, "%v: %v", obj, err)
	}
	if sum.String() != m.Digest {
		return fail(verify.KindMismatch, "%v hashes to %s, pinned %s", obj, sum, m.Digest)
	}
	if m.Size > b3.GroupSize {
		stored, err := store.GetAtMost(ctx, st, verify.OutboardKey(sum.Hex()), int64(b3.OutboardSize(m.Size)))
		if err != nil {
			return fail(verify.KindReadFailed, "Bao outboard: %v", err)
		}
		if !bytes.Equal(stored, outboard) {
			return fail(verify.KindMismatch, "stored Bao outboard differs from the one recomputed from the bytes")
		}
	}
	return nil
}
