package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

// ErrNotValidated is wrapped when a snapshot has no passing validation
// report that an approval could sign.
var ErrNotValidated = errors.New("not VALIDATED")

// approvalsPrefix is where the DSSE envelopes approving manifest d live.
func approvalsPrefix(d verify.Digest) string {
	return "admission/sha256/" + d.Hex() + "/approvals/"
}

// ValidateAndApprove is pinfs approve without --report: it validates
// manifest d itself, as Validate does with f and o, saves the report (and,
// when it passed, its marker) as pinfs validate does, and signs it when it
// passed. A report found in the store is a claim of whoever wrote it, so
// an approval signs only a validation the approver ran. It returns the
// report and its digest in every case; when the validation failed, env
// is "" and err wraps ErrNotValidated.
func ValidateAndApprove(ctx context.Context, st store.Store, d verify.Digest, f *Fences, o Options, s *sign.Signer, a sign.Approval) (r *Report, rd, env verify.Digest, err error) {
	if r, err = Validate(ctx, st, d, f, o); err != nil {
		return nil, "", "", err
	}
	if rd, err = Save(ctx, st, r); err != nil {
		return nil, "", "", err
	}
	if !r.OK {
		return r, rd, "", fmt.Errorf("%s is %w: report %s has %d hard failures (%s)", d, ErrNotValidated, rd, len(r.Failures), r.Failures[0].Kind)
	}
	// The snapshot was just fetched from o's reader: fetch it from there
	// again (its cached copy and index) rather than from the store.
	env, _, err = approveFrom(ctx, st, o.meta(st), d, s, rd, o.Policy, a)
	return r, rd, env, err
}

// Approve signs manifest d together with report rd and stores the
// envelope beside the manifest, keyed by the envelope's own SHA-256. rd
// must be a passing report of d that vouches for d's digests under policy
// pol (Report.Vouches; with pol nil any passing report will do), the
// policy in force for the approver. It returns the envelope's digest and
// the report. The manifest itself is never
// rewritten: an approval is a record next to it.
//
// Approve does not validate: the report is one the caller produced (pinfs
// validate, or ValidateAndApprove). It never picks a report from the
// store, whose reports anyone who can write the store can forge.
func Approve(ctx context.Context, st store.Blobs, d verify.Digest, s *sign.Signer, rd verify.Digest, pol *sign.Policy, a sign.Approval) (env verify.Digest, r *Report, err error) {
	return approveFrom(ctx, st, st, d, s, rd, pol, a)
}

// approveFrom is Approve with the manifest and member table read from g.
func approveFrom(ctx context.Context, st store.Blobs, g verify.Getter, d verify.Digest, s *sign.Signer, rd verify.Digest, pol *sign.Policy, a sign.Approval) (env verify.Digest, r *Report, err error) {
	if _, err := verify.Fetch(ctx, g, d); err != nil {
		return "", nil, err
	}
	if rd == "" {
		return "", nil, fmt.Errorf("approve %s: no report given: %w", d, ErrNotValidated)
	}
	var pd verify.Digest
	if pol != nil {
		pd = pol.Digest()
	}
	if r, err = vouchingReport(ctx, st, d, rd, pd); err != nil {
		return "", nil, fmt.Errorf("%s is %w: %w", d, ErrNotValidated, err)
	}
	envelope, err := s.Sign(ctx, d, rd, a)
	if err != nil {
		return "", nil, err
	}
	env = verify.SHA256(envelope)
	if err := st.Put(ctx, approvalsPrefix(d)+env.Hex(), envelope); err != nil {
		return "", nil, fmt.Errorf("store approval of %s: %w", d, err)
	}
	return env, r, nil
}

// Approvals returns every approval envelope stored for manifest d. An
// envelope whose bytes do not match its key is skipped (it can never
// count: its key names other bytes).
func Approvals(ctx context.Context, st store.Blobs, d verify.Digest) ([][]byte, error) {
	l, ok := st.(store.KeyLister)
	if !ok {
		return nil, fmt.Errorf("%v cannot list keys: approvals cannot be found", st)
	}
	keys, err := l.List(ctx, approvalsPrefix(d))
	if err != nil {
		return nil, fmt.Errorf("list approvals of %s: %w", d, err)
	}
	var envs [][]byte
	for _, k := range keys {
		b, err := st.Get(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("approval %s: %w", k, err)
		}
		if verify.SHA256(b).Hex() == k[strings.LastIndexByte(k, '/')+1:] {
			envs = append(envs, b)
		}
	}
	return envs, nil
}

// Approved checks that manifest d is approved under policy p: at least
// p's threshold of distinct approver keys signed d together with a
// passing validation report of d that vouches for its digests under p
// (Report.Vouches: it hashed every member, or inherited only from parents
// approved under p). A signature over a report that inherited on the
// store's word counts under no policy, so by induction every digest of an
// approved snapshot was hashed by a validation. It returns the counted
// signatures, or an error wrapping sign.ErrNotApproved that says why not.
func Approved(ctx context.Context, st store.Blobs, d verify.Digest, p *sign.Policy) ([]sign.Signature, error) {
	envs, err := Approvals(ctx, st, d)
	if err != nil {
		return nil, err
	}
	return p.Check(ctx, envs, d, reportVouchesUnder(st, d, p))
}

// reportVouchesUnder is the check sign.Policy.Check makes of the report an
// approval of d signs, under policy p.
func reportVouchesUnder(st store.Blobs, d verify.Digest, p *sign.Policy) func(context.Context, verify.Digest) error {
	return func(ctx context.Context, rd verify.Digest) error {
		_, err := vouchingReport(ctx, st, d, rd, p.Digest())
		return err
	}
}
