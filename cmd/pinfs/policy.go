package main

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/admission"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

// policyFlag defines --policy on fs.
func policyFlag(fs *pflag.FlagSet) *string {
	return fs.String("policy", "", "trust policy `FILE`: {\"approvers\": [\"alice.pub\", ...], \"threshold\": 1} (see docs/admission.md)")
}

// loadPolicy loads the policy file at path, or returns nil for "".
func loadPolicy(path string) (*sign.Policy, error) {
	if path == "" {
		return nil, nil
	}
	return sign.LoadPolicy(path)
}

// approval is the outcome of checking a snapshot's approvals under a
// policy (pinfs verify --policy, pinfs mount --policy).
type approval struct {
	Policy    verify.Digest `json:"policy"`
	Approved  bool          `json:"approved"`
	Reason    string        `json:"reason,omitempty"`
	Approvers []string      `json:"approvers"` // key ids that count
}

// checkApproval checks snapshot d's approvals under policy p.
func checkApproval(ctx context.Context, st store.Blobs, d verify.Digest, p *sign.Policy) *approval {
	a := &approval{Policy: p.Digest(), Approvers: []string{}}
	sigs, err := admission.Approved(ctx, st, d, p)
	for _, s := range sigs {
		a.Approvers = append(a.Approvers, s.KeyID)
	}
	a.Approved = err == nil
	if err != nil {
		a.Reason = oneLine(err)
	}
	return a
}
