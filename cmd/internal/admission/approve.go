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
// report: approve and activation need one.
var ErrNotValidated = errors.New("not VALIDATED: run pinfs validate first")

// approvalsPrefix is where the DSSE envelopes approving manifest d live.
func approvalsPrefix(d verify.Digest) string {
	return "admission/sha256/" + d.Hex() + "/approvals/"
}

// Approve signs manifest d together with a passing validation report of
// it (report, or the newest one when report is "") and stores the
// envelope beside the manifest, keyed by the envelope's own SHA-256. It
// returns the envelope's and the report's digests. The manifest itself is
// never rewritten: an approval is a record next to it.
func Approve(ctx context.Context, st store.Blobs, d verify.Digest, s *sign.Signer, report verify.Digest, a sign.Approval) (env, rd verify.Digest, err error) {
	if _, err := verify.Fetch(ctx, st, d); err != nil {
		return "", "", err
	}
	rd = report
	if rd == "" {
		passed, err := Validated(ctx, st, d)
		if err != nil {
			return "", "", err
		}
		if len(passed) == 0 {
			return "", "", fmt.Errorf("%s is %w", d, ErrNotValidated)
		}
		rd = passed[0]
	}
	if err := ReportOK(ctx, st, d, rd); err != nil {
		return "", "", fmt.Errorf("%s is %w: %w", d, ErrNotValidated, err)
	}
	envelope, err := s.Sign(ctx, d, rd, a)
	if err != nil {
		return "", "", err
	}
	env = verify.SHA256(envelope)
	if err := st.Put(ctx, approvalsPrefix(d)+env.Hex(), envelope); err != nil {
		return "", "", fmt.Errorf("store approval of %s: %w", d, err)
	}
	return env, rd, nil
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
// passing validation report of d. It returns their signatures, or an
// error wrapping sign.ErrNotApproved that says why not.
func Approved(ctx context.Context, st store.Blobs, d verify.Digest, p *sign.Policy) ([]sign.Signature, error) {
	envs, err := Approvals(ctx, st, d)
	if err != nil {
		return nil, err
	}
	return p.Check(ctx, envs, d, func(ctx context.Context, rd verify.Digest) error {
		return ReportOK(ctx, st, d, rd)
	})
}
