package admission

import (
	"context"
	"errors"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

// A member's digest is a claim of whoever wrote the manifest: a pin may
// have taken it from the digest cache (store/versions) or from a shard's
// partial table without reading the bytes, and anyone who can write the
// store can make those say anything. Validation is where the claim
// becomes a fact: it re-reads and hashes every member, except those whose
// object, version, size and digest it inherits unchanged from a parent
// that a trusted report vouches for (Report.Vouches). Every report that
// vouches hashed its own new and changed members this way, so by
// induction an APPROVED snapshot's digests are all facts.

// memberIdentity is what a member's digest is a fact about: the bytes of
// one object version (or CAS blob) of one size.
type memberIdentity struct {
	bucket, key, version, cas, digest string
	size                              int64
}

func identityOf(m *verify.Member) memberIdentity {
	id := memberIdentity{cas: m.CAS, digest: m.Digest, size: m.Size}
	if m.S3 != nil {
		id.bucket, id.key, id.version = m.S3.Bucket, m.S3.Key, m.S3.VersionID
	}
	return id
}

// UntrustedParent is a parent whose digests a validation did not inherit,
// and why.
type UntrustedParent struct {
	Parent verify.Digest `json:"parent"`
	Reason string        `json:"reason"`
}

// parentVouched returns nil if the digests of parent d may be inherited
// under p, or an error saying why not. With p, d must be APPROVED under p
// by approvals of reports that vouch under p; without, d must have a
// passing report in the store that vouches (a v2 report, or a deep one).
func parentVouched(ctx context.Context, st store.Blobs, d verify.Digest, p *sign.Policy) error {
	if p == nil {
		rs, err := passingReports(ctx, st, d)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Vouches("") {
				return nil
			}
		}
		if len(rs) == 0 {
			return ErrNotValidated
		}
		return errors.New("VALIDATED only by reports that did not hash its members (pinfs.report.v1)")
	}
	_, err := Approved(ctx, st, d, p)
	return err
}

// planHashing decides which members of t a validation hashes, given the
// parents (nil where a parent did not resolve), and fills h. trust says
// whether parent i may be inherited from; its error is the reason when
// not. Deep hashes every member. t and the parents' tables are verified,
// so sorted by path: t is walked once, in step with the parents'.
func planHashing(ctx context.Context, t *verify.Table, parents []*verify.Checked, deep bool, trust func(i int) error, h *Hashing) ([]bool, error) {
	inherited := newIdentities()
	paths := &pathWalk{}
	h.Parents = []verify.Digest{}
	for i, pc := range parents {
		if pc == nil {
			continue
		}
		if err := trust(i); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			h.Untrusted = append(h.Untrusted, UntrustedParent{pc.Manifest.SnapshotID, err.Error()})
			continue
		}
		h.Parents = append(h.Parents, pc.Manifest.SnapshotID)
		inherited.add(pc.Table)
		paths.add(pc.Table)
	}
	inherited.seal()
	hash := make([]bool, t.Len())
	for i := range t.Len() {
		m := t.Member(i)
		known := paths.has(m.Path) // every path, in order, to keep the walk in step
		switch {
		case inherited.has(identityOf(&m)):
			h.Inherited++
			hash[i] = deep
		case known:
			h.Changed++
			hash[i] = true
		default:
			h.New++
			hash[i] = true
		}
		if hash[i] {
			h.Hashed++
		}
	}
	return hash, nil
}
