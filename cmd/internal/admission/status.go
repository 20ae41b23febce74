package admission

import (
	"context"
	"fmt"
	"slices"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/gate"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

// Lifecycle states. A snapshot moves only forward; each state is a record
// beside the immutable manifest.
const (
	StateBuilding  = "BUILDING"  // the manifest exists, no passing validation report
	StateValidated = "VALIDATED" // a passing validation report
	StateApproved  = "APPROVED"  // approvals that satisfy a trust policy
	StateActive    = "ACTIVE"    // some gate has pointed at it
)

// Status is what `pinfs status DIGEST` reports.
type Status struct {
	Digest             verify.Digest     `json:"digest"`
	State              string            `json:"state"`
	Purpose            string            `json:"purpose,omitempty"`
	Members            int64             `json:"members"`
	Bytes              int64             `json:"bytes"`
	TombstoneWatermark int64             `json:"tombstoneWatermark"`
	BenchmarkFence     int64             `json:"benchmarkFence"`
	Reports            []ReportSummary   `json:"reports"`
	Signatures         []SignatureStatus `json:"signatures"`
	Policies           []PolicyStatus    `json:"policies"`
	Aliases            []AliasRef        `json:"aliases"`
}

// ReportSummary is one passing validation report.
type ReportSummary struct {
	Digest      verify.Digest `json:"digest"`
	ValidatedAt string        `json:"validatedAt"`
	Deep        bool          `json:"deep"`
	Gate        string        `json:"gate,omitempty"`
}

// SignatureStatus is one stored approval envelope and which of the known
// policies' keys it verifies under.
type SignatureStatus struct {
	Envelope verify.Digest `json:"envelope"`
	KeyID    string        `json:"keyId,omitempty"`
	Role     string        `json:"role,omitempty"`
	Approver string        `json:"approver,omitempty"`
	Time     string        `json:"time,omitempty"`
	Report   verify.Digest `json:"report,omitempty"`
	// Valid lists the policies (by digest) whose approvers include the
	// signing key and under which the signature checks out.
	Valid []verify.Digest `json:"validUnder"`
}

// PolicyStatus says whether the snapshot is approved under one policy.
type PolicyStatus struct {
	Policy   verify.Digest `json:"policy"`
	From     string        `json:"from"` // "--policy" or "gate NAME"
	Approved bool          `json:"approved"`
	Reason   string        `json:"reason,omitempty"`
}

// AliasRef is a gate whose history points at the snapshot.
type AliasRef struct {
	Gate        string  `json:"gate"`
	Generations []int64 `json:"generations"`
	Current     bool    `json:"current"`
}

// StatusOf reports the lifecycle of snapshot d. p, when set, is a policy
// to check the approvals under, in addition to the policies kept with the
// gates that point at d.
func StatusOf(ctx context.Context, st store.Store, d verify.Digest, p *sign.Policy) (*Status, error) {
	c, err := verify.Fetch(ctx, st, d)
	if err != nil {
		return nil, err
	}
	m := c.Manifest
	s := &Status{
		Digest: d, State: StateBuilding, Purpose: m.Purpose, Members: m.Members.Count, Bytes: m.Members.Bytes,
		TombstoneWatermark: deref(m.TombstoneWatermark), BenchmarkFence: deref(m.BenchmarkFence),
		Reports: []ReportSummary{}, Signatures: []SignatureStatus{}, Policies: []PolicyStatus{}, Aliases: []AliasRef{},
	}
	passed, err := Validated(ctx, st, d)
	if err != nil {
		return nil, err
	}
	for _, rd := range passed {
		r, err := LoadReport(ctx, st, rd)
		if err != nil {
			return nil, err
		}
		rs := ReportSummary{Digest: rd, ValidatedAt: r.ValidatedAt, Deep: r.Deep}
		if r.Gate != nil {
			rs.Gate = r.Gate.Name
		}
		s.Reports = append(s.Reports, rs)
		s.State = StateValidated
	}
	policies := map[verify.Digest]*sign.Policy{}
	var from []PolicyStatus
	if p != nil {
		pd := p.Digest()
		policies[pd] = p
		from = append(from, PolicyStatus{Policy: pd, From: "--policy"})
	}
	if err := s.aliases(ctx, st, policies, &from); err != nil {
		return nil, err
	}
	envs, err := Approvals(ctx, st, d)
	if err != nil {
		return nil, err
	}
	for _, env := range envs {
		s.Signatures = append(s.Signatures, signatureStatus(ctx, st, env, d, policies))
	}
	for _, ps := range from {
		_, err := Approved(ctx, st, d, policies[ps.Policy])
		ps.Approved = err == nil
		if err != nil {
			ps.Reason = err.Error()
		} else if s.State == StateValidated {
			s.State = StateApproved
		}
		s.Policies = append(s.Policies, ps)
	}
	if len(s.Aliases) > 0 {
		s.State = StateActive
	}
	return s, nil
}

// aliases fills s.Aliases from every gate's history and adds the policy
// of each gate that points at the snapshot to policies.
func (s *Status) aliases(ctx context.Context, st store.Store, policies map[verify.Digest]*sign.Policy, from *[]PolicyStatus) error {
	l, ok := st.(store.KeyLister)
	if !ok {
		return fmt.Errorf("%v cannot list keys: gates cannot be found", st)
	}
	names, err := gate.Names(ctx, l)
	if err != nil {
		return err
	}
	for _, name := range names {
		g, err := gate.Open(st, name)
		if err != nil {
			return err
		}
		hist, err := g.Log(ctx)
		if err != nil {
			return err
		}
		ref := AliasRef{Gate: name, Current: hist[0].Digest == s.Digest}
		for _, r := range hist {
			if r.Digest == s.Digest {
				ref.Generations = append(ref.Generations, r.Generation)
			}
		}
		if len(ref.Generations) == 0 {
			continue
		}
		slices.Reverse(ref.Generations)
		s.Aliases = append(s.Aliases, ref)
		if pd := hist[0].Policy; pd != "" && policies[pd] == nil {
			pol, err := LoadPolicy(ctx, st, pd)
			if err != nil {
				return err
			}
			policies[pd] = pol
			*from = append(*from, PolicyStatus{Policy: pd, From: "gate " + name})
		}
	}
	return nil
}

// signatureStatus describes one envelope: who signed what, when, and
// under which of the policies it is valid: counted by the policy's Check,
// so with a role it accepts and a passing report of d that vouches under
// the policy, as Approved counts it.
func signatureStatus(ctx context.Context, st store.Blobs, env []byte, d verify.Digest, policies map[verify.Digest]*sign.Policy) SignatureStatus {
	ss := SignatureStatus{Envelope: verify.SHA256(env), Valid: []verify.Digest{}}
	for pd, p := range policies {
		for _, key := range p.Keys() {
			sig, err := sign.Open(ctx, env, key)
			if err != nil || sig.Manifest != d {
				continue
			}
			ss.KeyID, ss.Role, ss.Approver = sig.KeyID, sig.Approval.Role, sig.Approval.Approver
			ss.Time, ss.Report = sig.Approval.Time.UTC().Format("2006-01-02T15:04:05Z"), sig.Report
			if counted, _ := p.Check(ctx, [][]byte{env}, d, reportVouchesUnder(st, d, p)); len(counted) > 0 {
				ss.Valid = append(ss.Valid, pd)
			}
		}
	}
	slices.Sort(ss.Valid)
	return ss
}
