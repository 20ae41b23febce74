// Package admission decides which snapshots a run may use: validation
// (VALIDATED, a content-addressed report), approval (APPROVED, signatures
// over the manifest and the report) and activation through a gate
// (ACTIVE). docs/admission.md describes the states and the records.
package admission

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/check"
	"github.com/pinfs/pinfs/cmd/internal/lineage"
	"github.com/pinfs/pinfs/cmd/internal/pin"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/jcs"
	"github.com/pinfs/pinfs/verify/sign"
)

// Options select how deep Validate checks the members' objects.
type Options struct {
	Deep bool // re-read and re-hash every member, as `pinfs verify --deep`
	Jobs int  // members checked in parallel; <= 0 means 16
	// Policy is the trust policy in force: a member's digest is inherited
	// without hashing only from a parent APPROVED under it (TrustPolicy).
	// Nil trusts parents with a passing report in the store (TrustStore).
	Policy *sign.Policy
	// Meta, when set, is what the manifest and member tables of the
	// snapshot and of its parents are read from (a metacache.Cache over
	// the store: its verified copies and index); reports, approvals and
	// the members' objects are always read from the store.
	Meta verify.Getter
}

// meta is what o reads manifests and member tables from: o.Meta, or st.
func (o Options) meta(st store.Store) verify.Getter {
	if o.Meta != nil {
		return o.Meta
	}
	return st
}

// Validate runs the gate checks on manifest d and returns the report. f
// holds the fences of the gate that applies; nil validates without a gate.
//
// Every member is re-read and hashed unless its object, version, size and
// digest are those of a member of a trusted parent (see o.Policy, and
// Report.Hashing for the counts); every other member gets the HEAD.
//
// Hard failures (Report.Failures; OK is false when there is any): a
// manifest or member table that does not fetch or verify; every member
// problem `pinfs verify` reports (unversioned members, pinned versions
// missing or unreadable, wrong sizes, wrong bytes of a hashed member; duplicate
// ids, unsafe paths); an id in two splits; members revoked or fenced off
// by the gate's lists; a manifest built below the gate's tombstone
// watermark or benchmark fence; a parent that does not fetch and verify;
// a transform not pinned by a digest. Orphan ids and source coverage are
// metrics only.
//
// It returns an error only when the validation could not run (for
// example the context ended); whatever is wrong with the snapshot is in
// the report.
func Validate(ctx context.Context, st store.Store, d verify.Digest, f *Fences, o Options) (*Report, error) {
	v := &validation{
		r: &Report{
			Schema: ReportSchema, Manifest: d, Deep: o.Deep, Failures: []Failure{},
			ValidatedAt: time.Now().UTC().Format(time.RFC3339Nano),
		},
		byKind: map[string]int{},
		f:      f,
	}
	if f != nil {
		v.r.Gate = &GateRef{Name: f.Gate, Generation: f.Generation, TombstoneWatermark: f.TombstoneWatermark, BenchmarkFence: f.BenchmarkFence}
	}
	if err := v.run(ctx, st, d, o); err != nil {
		return nil, err
	}
	v.r.OK = len(v.r.Failures) == 0
	return v.r, nil
}

// validation is one run of Validate.
type validation struct {
	r      *Report
	byKind map[string]int // index in r.Failures of each member failure kind
	f      *Fences
}

// fail records a failure of the manifest itself.
func (v *validation) fail(kind, format string, a ...any) {
	v.r.Failures = append(v.r.Failures, Failure{Kind: kind, Detail: fmt.Sprintf(format, a...)})
}

// failMember records a failure of the member with id; members of one kind
// share one Failure, whose detail is the first member's.
func (v *validation) failMember(kind, id, detail string) {
	i, ok := v.byKind[kind]
	if !ok {
		i = len(v.r.Failures)
		v.byKind[kind] = i
		v.r.Failures = append(v.r.Failures, Failure{Kind: kind, Detail: detail})
	}
	f := &v.r.Failures[i]
	f.Count++
	if len(f.Members) < MaxNamed {
		f.Members = append(f.Members, id)
	}
}

func (v *validation) run(ctx context.Context, st store.Store, d verify.Digest, o Options) error {
	c, err := verify.Fetch(ctx, o.meta(st), d)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		v.fail(KindInvalidSnapshot, "%v", err)
		return nil
	}
	m, mt := c.Manifest, &v.r.Metrics
	mt.Members, mt.Bytes = c.Table.Len(), m.Members.Bytes
	mt.Sources, mt.Parents = len(m.Sources), len(m.Parents)
	for _, s := range m.Sources {
		if s.Listing != "" {
			mt.SourcesWithListing++
		}
	}
	v.checkManifest(m)
	parents, err := v.checkParents(ctx, o.meta(st), c)
	if err != nil {
		return err
	}
	h := &Hashing{Trust: TrustStore}
	if o.Policy != nil {
		h.Trust, h.Policy = TrustPolicy, o.Policy.Digest()
	}
	v.r.Hashing = h
	hash, err := planHashing(ctx, c.Table, parents, o.Deep, func(i int) error {
		return parentVouched(ctx, st, m.Parents[i], o.Policy)
	}, h)
	if err != nil {
		return err
	}

	// The member problems and the object checks are `pinfs verify`'s.
	cr, err := check.Fetched(ctx, st, c, check.Options{Deep: o.Deep, Jobs: o.Jobs, Hash: func(i int) bool { return hash[i] }})
	if err != nil {
		return err
	}
	mt.VersionsChecked = cr.Checked
	mt.Unversioned = cr.Counts[verify.KindUnversioned]
	mt.DuplicateIDs = cr.Counts[verify.KindDuplicateID]
	for _, p := range cr.Problems {
		v.failMember(p.Kind, cmp.Or(p.ID, p.Path), p.Path+": "+p.Detail)
	}

	v.scanMembers(c.Table, m)
	return nil
}

// checkManifest checks the manifest's own fields: the transform, and the
// fences it was built at against the gate's.
func (v *validation) checkManifest(m *verify.Manifest) {
	if err := pin.CheckTransform(m.Transform); err != nil {
		v.fail(KindUnpinnedTransform, "manifest %v", err)
	}
	f := v.f
	if f == nil {
		return
	}
	if w := deref(m.TombstoneWatermark); w < f.TombstoneWatermark {
		v.fail(KindTombstoneWatermark, "built at tombstone watermark %d, gate %s is at %d: build a new manifest", w, f.Gate, f.TombstoneWatermark)
	}
	if w := deref(m.BenchmarkFence); w < f.BenchmarkFence {
		v.fail(KindBenchmarkFence, "built at benchmark fence %d, gate %s is at %d: build a new manifest", w, f.Gate, f.BenchmarkFence)
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// scanMembers walks the members once for the fence hits, ids in two
// splits, orphans and the replay hash.
func (v *validation) scanMembers(t *verify.Table, m *verify.Manifest) {
	cov := newCoverage(m.Sources)
	mt := &v.r.Metrics
	var splits map[string]string // id -> first split; only when ids repeat
	var twice map[string]bool
	if mt.DuplicateIDs > 0 {
		splits, twice = map[string]string{}, map[string]bool{}
	}
	for i := range t.Len() {
		mb := t.Member(i)
		if f := v.f; f != nil {
			revoked, benchmark := f.Hits(&mb)
			if revoked {
				mt.TombstoneHits++
				v.failMember(KindTombstoneHit, mb.ID, fmt.Sprintf("%s: revoked in gate %s (tombstone watermark %d)", mb.Path, f.Gate, f.TombstoneWatermark))
			}
			if benchmark {
				mt.BenchmarkHits++
				v.failMember(KindBenchmarkHit, mb.ID, fmt.Sprintf("%s: in a benchmark list of gate %s (benchmark fence %d)", mb.Path, f.Gate, f.BenchmarkFence))
			}
		}
		if !cov.covers(&mb) {
			mt.OrphanIDs++
		}
		if splits != nil {
			first, seen := splits[mb.ID]
			switch {
			case !seen:
				splits[mb.ID] = mb.Split
			case first != mb.Split && !twice[mb.ID]:
				twice[mb.ID] = true
				mt.IDsInTwoSplits++
				v.failMember(KindIDInTwoSplits, mb.ID, fmt.Sprintf("id %s in splits %q and %q", verify.Printable(mb.ID), first, mb.Split))
			}
		}
	}
	mt.ReplayHash = replayHash(t)
}

// coverage tells whether a member lies under one of a manifest's sources.
type coverage struct {
	s3  []string // s3://bucket/prefix/ of the S3 sources
	dir bool     // a dir: source, whose bytes live in the store's CAS area
}

func newCoverage(srcs []verify.Source) *coverage {
	c := &coverage{}
	for _, s := range srcs {
		switch {
		case strings.HasPrefix(s.URI, "s3://"):
			c.s3 = append(c.s3, s.URI)
		case strings.HasPrefix(s.URI, "dir:"):
			c.dir = true
		}
	}
	return c
}

// covers reports whether m comes from a source: an S3 member under an S3
// source's URI, or a member in the CAS area (a cas member, or in an S3
// store the uploaded cas/blake3/<hex> key) when there is a dir: source.
func (c *coverage) covers(m *verify.Member) bool {
	if m.S3 == nil {
		return c.dir && m.CAS != ""
	}
	u := "s3://" + m.S3.Bucket + "/" + m.S3.Key
	for _, p := range c.s3 {
		if strings.HasPrefix(u, p) {
			return true
		}
	}
	h, ok := strings.CutPrefix(m.Digest, "blake3:")
	if !c.dir || !ok {
		return false
	}
	k := verify.CASKey(h)
	return m.S3.Key == k || strings.HasSuffix(m.S3.Key, "/"+k)
}

// replayHash returns the SHA-256 of the canonical JSON of the (id,
// digest) pairs of t's members sorted by id, then digest:
// [["id","blake3:…"],…]. It sorts member indexes (4 bytes a member)
// rather than pairs of strings, which at ten million members would hold a
// digest string each; a table whose ids are its paths is in id order
// already, which the sort notices in one pass.
func replayHash(t *verify.Table) verify.Digest {
	idx := make([]int32, t.Len()) // a table within store.MaxTable has < 2^31 members
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(x, y int32) int {
		return cmp.Or(strings.Compare(t.ID(int(x)), t.ID(int(y))), compareDigest(t, int(x), int(y)))
	})
	h := sha256.New()
	buf := []byte{'['}
	for k, i := range idx {
		if k > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, '[')
		buf = jcs.AppendString(buf, t.ID(int(i)))
		buf = append(buf, ',')
		buf = jcs.AppendString(buf, t.Digest(int(i)))
		buf = append(buf, ']')
		if len(buf) >= 64<<10 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(append(buf, ']'))
	return verify.Digest("sha256:" + hex.EncodeToString(h.Sum(nil)))
}

// compareDigest orders members i and j of t by digest as strings: by
// their BLAKE3 sums when both are well formed (the string is then
// blake3:<the sum's lower-case hex>, which sorts as the sum's bytes).
func compareDigest(t *verify.Table, i, j int) int {
	x, okx := t.Sum(i)
	y, oky := t.Sum(j)
	if okx && oky {
		return bytes.Compare(x[:], y[:])
	}
	return strings.Compare(t.Digest(i), t.Digest(j))
}

// checkParents fetches and verifies every parent from g, and diffs the snapshot
// against the first one. It returns the parents in manifest order, nil
// for those that do not resolve.
func (v *validation) checkParents(ctx context.Context, g verify.Getter, c *verify.Checked) ([]*verify.Checked, error) {
	parents := make([]*verify.Checked, len(c.Manifest.Parents))
	for i, p := range c.Manifest.Parents {
		pc, err := verify.Fetch(ctx, g, p)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			v.fail(KindUnresolvableParent, "parent %s: %v", p, err)
			continue
		}
		parents[i] = pc
		v.r.Metrics.ParentsResolvable++
		if i == 0 {
			// Counts only: the lists would hold a Member per change.
			df := lineage.Count(pc.Table, c.Table)
			v.r.Metrics.Diff = &Diff{Parent: p, Added: df.Added, Removed: df.Removed, Changed: df.Changed, Moved: df.Moved}
		}
	}
	return parents, nil
}
