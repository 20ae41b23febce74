package admission

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/jcs"
)

// ReportSchema is the schema name and version of the validation reports
// Validate writes. A v2 report says which members it hashed (Hashing).
const ReportSchema = "pinfs.report.v2"

// reportSchemaV1 is the schema of the reports written before Hashing: they
// still load (an approval may point at one), but they vouch for no digest
// (see Report.Vouches).
const reportSchemaV1 = "pinfs.report.v1"

// ErrBadReport is wrapped by every error about a stored report that is
// malformed, tampered with, or not a passing report of the manifest asked
// about.
var ErrBadReport = errors.New("invalid validation report")

// Report is the outcome of validating one manifest: the hard failures that
// keep it out of VALIDATED, and the gate metrics. It is stored as canonical
// JSON (verify/jcs) under its own SHA-256 (ReportKey); field names are
// camelCase like the manifest's.
type Report struct {
	Schema   string        `json:"schema"`
	Manifest verify.Digest `json:"manifest"`
	// OK reports that there are no failures: the manifest is VALIDATED.
	OK       bool      `json:"ok"`
	Failures []Failure `json:"failures"`
	// ValidatedAt is when the validation ran (RFC 3339, UTC), so that two
	// validations of one manifest give two reports.
	ValidatedAt string   `json:"validatedAt"`
	Deep        bool     `json:"deep"`
	Gate        *GateRef `json:"gate,omitempty"` // the gate whose fences applied; absent without one
	// Hashing says which members were re-read and hashed, and why; it is
	// present in every v2 report and absent in a v1 report.
	Hashing *Hashing `json:"hashing,omitempty"`
	Metrics Metrics  `json:"metrics"`
}

// Trust bases of a validation: what a parent must be for the digests of
// its members to be inherited without hashing them again.
const (
	// TrustPolicy: the parent is APPROVED under the policy in force, by
	// approvals of reports that vouch for its digests under that policy.
	TrustPolicy = "policy"
	// TrustStore: no policy; the parent has a passing v2 report in the
	// store. The store is then the only trust root.
	TrustStore = "store"
)

// Hashing is the part of a report that turns the members' digests into
// facts: the members it re-read and hashed, and those whose (object,
// version, size, digest) it inherited unchanged from a trusted parent.
// New + Changed + Inherited is the number of members; Hashed is New +
// Changed, or every member with Deep.
type Hashing struct {
	Trust  string        `json:"trust"`            // TrustPolicy or TrustStore
	Policy verify.Digest `json:"policy,omitempty"` // with TrustPolicy: the policy in force
	// Parents are the parents inherited from, in manifest order;
	// Untrusted the resolvable ones that were not, and why.
	Parents   []verify.Digest   `json:"parents"`
	Untrusted []UntrustedParent `json:"untrusted,omitempty"`
	Hashed    int               `json:"hashed"`    // members re-read and hashed
	New       int               `json:"new"`       // no trusted parent has a member at its path: hashed
	Changed   int               `json:"changed"`   // a trusted parent has its path with other bytes or another version: hashed
	Inherited int               `json:"inherited"` // as in a trusted parent: hashed only with Deep
}

// Vouches reports whether r makes the digests of its manifest's members
// facts for a validation under policy pd ("" for none): it passed and
// hashed every member, or inherited only under pd itself. Without a
// policy any passing v2 report vouches (the store is the trust root). A
// v1 report hashed nothing unless deep, so it vouches only when deep.
// Under a policy, a report that inherited on the store's word (TrustStore)
// vouches for nothing: an approval of it counts under no policy.
func (r *Report) Vouches(pd verify.Digest) bool {
	if pd == "" {
		return r.OK && (r.Hashing != nil || r.Deep)
	}
	under, every := r.vouching()
	return every || under == pd
}

// vouching returns the policies r vouches under: every policy when it
// passed and hashed every member (or is a deep v1 report), else only the
// policy it inherited under ("" for none).
func (r *Report) vouching() (under verify.Digest, every bool) {
	h := r.Hashing
	switch {
	case !r.OK:
		return "", false
	case h == nil:
		return "", r.Deep
	case h.Hashed == r.Metrics.Members:
		return "", true
	case h.Trust == TrustPolicy:
		return h.Policy, false
	}
	return "", false
}

// CountsUnderNoPolicy reports whether an approval of r would count under
// no policy at all: r failed, or it inherited digests on the store's word
// (validated without a policy), or it is a v1 report that hashed nothing.
func (r *Report) CountsUnderNoPolicy() bool {
	under, every := r.vouching()
	return !every && under == ""
}

// Failure is one kind of hard failure, with the members it concerns.
type Failure struct {
	Kind   string `json:"kind"`   // a Kind* constant
	Detail string `json:"detail"` // one line: what is wrong (for member failures: the first member's problem)
	// Count is the number of members with this failure (0 for failures
	// of the manifest itself).
	Count int `json:"count,omitempty"`
	// Members are the ids of the first MaxNamed members with this failure,
	// in table order.
	Members []string `json:"members,omitempty"`
}

// MaxNamed is how many member ids a Failure names; Count has them all.
const MaxNamed = 100

// Failure kinds. The member kinds of verify and cmd/internal/check
// (unversioned, version_missing, size_mismatch, mismatch, read_failed,
// duplicate_id, unsafe_path, bad_member) are used as they are.
const (
	KindInvalidSnapshot    = "invalid_snapshot"    // the manifest or member table cannot be fetched or fails its digest
	KindIDInTwoSplits      = "id_in_two_splits"    // one id in members of different splits
	KindTombstoneHit       = "tombstone_hit"       // a member id or digest in the gate's revocation lists
	KindBenchmarkHit       = "benchmark_hit"       // a member id or digest in the gate's benchmark lists
	KindTombstoneWatermark = "tombstone_watermark" // built below the gate's tombstone watermark
	KindBenchmarkFence     = "benchmark_fence"     // built below the gate's benchmark fence
	KindUnresolvableParent = "unresolvable_parent" // a parent manifest that does not fetch and verify
	KindUnpinnedTransform  = "unpinned_transform"  // transform not pinned by a digest or commit
)

// GateRef names the gate whose fences a validation applied, as they were
// when it ran.
type GateRef struct {
	Name               string `json:"name"`
	Generation         int64  `json:"generation"`
	TombstoneWatermark int64  `json:"tombstoneWatermark"`
	BenchmarkFence     int64  `json:"benchmarkFence"`
}

// Metrics are the gate metrics of a report. Counts of members are counts
// of member table lines.
type Metrics struct {
	Members            int   `json:"members"`
	Bytes              int64 `json:"bytes"`
	VersionsChecked    int   `json:"versionsChecked"` // members whose object was checked in the store (HEAD, or re-read with deep)
	Unversioned        int   `json:"unversioned"`     // S3 members without a real version id
	Sources            int   `json:"sources"`
	SourcesWithListing int   `json:"sourcesWithListing"` // sources that record their listing digest (coverage)
	Parents            int   `json:"parents"`
	ParentsResolvable  int   `json:"parentsResolvable"` // parents whose manifest and member table fetch and verify
	DuplicateIDs       int   `json:"duplicateIds"`      // members whose id an earlier member already has
	OrphanIDs          int   `json:"orphanIds"`         // members not under any source of the manifest
	IDsInTwoSplits     int   `json:"idsInTwoSplits"`    // ids found in more than one split
	TombstoneHits      int   `json:"tombstoneHits"`
	BenchmarkHits      int   `json:"benchmarkHits"`
	// Diff counts the changes against the first parent; absent without
	// a parent or when the first parent does not resolve.
	Diff *Diff `json:"diff,omitempty"`
	// ReplayHash is the SHA-256 of the canonical JSON of the (id, digest)
	// pairs of all members, [[id, digest], …] sorted by id then digest
	// (byte order): equal sets give equal hashes whatever the paths,
	// splits or sources.
	ReplayHash verify.Digest `json:"replayHash,omitempty"`
	// BuildLatencySeconds is how long the build took, where known
	// (pinfs pin records no build time yet, so it is absent).
	BuildLatencySeconds *float64 `json:"buildLatencySeconds,omitempty"`
}

// Diff is the set difference against a parent, as cmd/internal/lineage
// computes it (members match by path).
type Diff struct {
	Parent  verify.Digest `json:"parent"`
	Added   int           `json:"added"`
	Removed int           `json:"removed"`
	Changed int           `json:"changed"`
	Moved   int           `json:"moved"` // moved between splits
}

// ReportKey is the store key of the report with digest d.
func ReportKey(d verify.Digest) string { return "reports/sha256/" + d.Hex() }

// validatedPrefix is the store prefix of the validated markers of manifest m.
func validatedPrefix(m verify.Digest) string { return "admission/sha256/" + m.Hex() + "/validated/" }

// ValidatedKey is the store key of the marker that says report r is a
// passing report of manifest m.
func ValidatedKey(m, r verify.Digest) string { return validatedPrefix(m) + r.Hex() }

// Encode returns the canonical JSON of r.
func (r *Report) Encode() ([]byte, error) { return jcs.Marshal(r) }

// Save writes r content-addressed (ReportKey) and, when r.OK, the marker
// that makes its manifest VALIDATED (ValidatedKey, holding the report
// digest and a newline). A failing report is saved too, for the audit
// trail, but never marked. It returns the report's digest.
func Save(ctx context.Context, st store.Blobs, r *Report) (verify.Digest, error) {
	if r.OK != (len(r.Failures) == 0) {
		return "", fmt.Errorf("report of %s: ok is %v with %d failures", r.Manifest, r.OK, len(r.Failures))
	}
	b, err := r.Encode()
	if err != nil {
		return "", fmt.Errorf("report of %s: %w", r.Manifest, err)
	}
	d := verify.SHA256(b)
	if err := st.Put(ctx, ReportKey(d), b); err != nil {
		return "", fmt.Errorf("storing report %s: %w", d, err)
	}
	if r.OK {
		if err := st.Put(ctx, ValidatedKey(r.Manifest, d), []byte(d.String()+"\n")); err != nil {
			return "", fmt.Errorf("marking %s validated by report %s: %w", r.Manifest, d, err)
		}
	}
	return d, nil
}

// LoadReport fetches report d and checks it: its bytes hash to d, are
// canonical JSON, and hold exactly the fields of a pinfs.report.v2 report
// (with hashing) or of a pinfs.report.v1 one (without), whose ok agrees
// with its failures.
func LoadReport(ctx context.Context, st store.Blobs, d verify.Digest) (*Report, error) {
	b, err := st.Get(ctx, ReportKey(d))
	if err != nil {
		return nil, fmt.Errorf("report %s: %w", d, err)
	}
	return parseReport(d, b)
}

// parseReport checks the bytes of report d (see LoadReport).
func parseReport(d verify.Digest, b []byte) (*Report, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("report %s: %s: %w", d, fmt.Sprintf(format, a...), ErrBadReport)
	}
	if got := verify.SHA256(b); got != d {
		return nil, bad("content hashes to %s (tampered with?)", got)
	}
	canon, err := jcs.Canonicalize(b)
	if err != nil {
		return nil, bad("%v", err)
	}
	if !bytes.Equal(canon, b) {
		return nil, bad("not in canonical (RFC 8785) form")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r Report
	if err := dec.Decode(&r); err != nil {
		return nil, bad("%v", err)
	}
	switch {
	case r.Schema != ReportSchema && r.Schema != reportSchemaV1:
		return nil, bad("schema %q, want %q", r.Schema, ReportSchema)
	case (r.Hashing == nil) != (r.Schema == reportSchemaV1):
		return nil, bad("schema %s with hashing %v", r.Schema, r.Hashing != nil)
	}
	if _, err := verify.ParseDigest(string(r.Manifest)); err != nil {
		return nil, bad("manifest: %v", err)
	}
	if r.OK != (len(r.Failures) == 0) {
		return nil, bad("ok is %v with %d failures", r.OK, len(r.Failures))
	}
	if _, err := time.Parse(time.RFC3339Nano, r.ValidatedAt); err != nil {
		return nil, bad("validatedAt: %v", err)
	}
	return &r, nil
}

// vouchingReport loads report rd and returns it if it verifies, names
// manifest d, passed and vouches for d's digests under policy pd
// (Report.Vouches; with pd "" any passing report will do): what an
// approval of d must point at to count under pd. The error wraps
// ErrBadReport and says which of these fails.
func vouchingReport(ctx context.Context, st store.Blobs, d, rd, pd verify.Digest) (*Report, error) {
	r, err := LoadReport(ctx, st, rd)
	switch {
	case err != nil:
		return nil, err
	case r.Manifest != d:
		return nil, fmt.Errorf("report %s is about manifest %s, not %s: %w", rd, r.Manifest, d, ErrBadReport)
	case !r.OK:
		return nil, fmt.Errorf("report %s of %s failed (%s): %w", rd, d, r.Failures[0].Kind, ErrBadReport)
	case pd != "" && !r.Vouches(pd):
		return nil, fmt.Errorf("report %s did not hash every member it did not inherit under policy %s (%s): %w", rd, pd, inheritedHow(r), ErrBadReport)
	}
	return r, nil
}

// inheritedHow says how report r, which hashed only some members, trusted
// the parents it inherited from.
func inheritedHow(r *Report) string {
	switch h := r.Hashing; {
	case h == nil:
		return "a pinfs.report.v1 report, which hashed no member"
	case h.Trust == TrustPolicy:
		return fmt.Sprintf("it inherited %d digests under policy %s", h.Inherited, h.Policy)
	default:
		return fmt.Sprintf("it inherited %d digests on the store's word, validated without a policy", h.Inherited)
	}
}

// Validated returns the digests of the passing reports of manifest d,
// newest validatedAt first. It lists the validated markers (st must be a
// store.KeyLister) and keeps only markers whose report loads, verifies,
// names d and passed: a marker alone proves nothing. None means d is not
// VALIDATED.
func Validated(ctx context.Context, st store.Blobs, d verify.Digest) ([]verify.Digest, error) {
	rs, err := passingReports(ctx, st, d)
	if err != nil {
		return nil, err
	}
	ds := make([]verify.Digest, len(rs))
	for i, r := range rs {
		ds[i] = r.digest
	}
	return ds, nil
}

// passing is a passing report of a manifest and its digest.
type passing struct {
	digest verify.Digest
	*Report
}

// passingReports is Validated with the reports it loaded.
func passingReports(ctx context.Context, st store.Blobs, d verify.Digest) ([]passing, error) {
	l, ok := st.(store.KeyLister)
	if !ok {
		return nil, fmt.Errorf("validation reports of %s: store %T cannot list keys", d, st)
	}
	keys, err := l.List(ctx, validatedPrefix(d))
	if err != nil {
		return nil, fmt.Errorf("validation reports of %s: %w", d, err)
	}
	type found struct {
		passing
		at time.Time
	}
	var fs []found
	for _, k := range keys {
		rd, err := verify.ParseDigest("sha256:" + path.Base(k))
		if err != nil {
			continue // not a marker
		}
		r, err := LoadReport(ctx, st, rd)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		if r.Manifest == d && r.OK {
			at, _ := time.Parse(time.RFC3339Nano, r.ValidatedAt) // checked by LoadReport
			fs = append(fs, found{passing{rd, r}, at})
		}
	}
	slices.SortFunc(fs, func(a, b found) int {
		return cmp.Or(b.at.Compare(a.at), strings.Compare(string(a.digest), string(b.digest)))
	})
	rs := make([]passing, len(fs))
	for i, f := range fs {
		rs[i] = f.passing
	}
	return rs, nil
}
