package sign

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/jcs"
)

// ErrNotApproved is wrapped by Policy.Check when fewer than the threshold of
// distinct approver keys validly approve the manifest.
var ErrNotApproved = errors.New("not approved under the trust policy")

// Policy is a trust policy: which public keys may approve, how many distinct
// ones must, and (optionally) in which roles. Only LoadPolicy and
// ParseKeptPolicy make one, and only from a policy that passed every check.
// A Policy is immutable and safe for concurrent use.
type Policy struct {
	keys      map[string]ed25519.PublicKey // by KeyID
	ids       []string                     // sorted
	threshold int
	roles     []string // sorted; empty: any role
	digest    verify.Digest
}

// policyFile is the JSON form of a trust policy (docs/admission.md).
type policyFile struct {
	// Approvers are public key files (PEM "PUBLIC KEY"), relative to the
	// policy file's directory unless absolute, or inline PEM text.
	Approvers []string `json:"approvers"`
	// Threshold is how many distinct approvers must sign: 1..len(Approvers).
	Threshold *int `json:"threshold"`
	// Roles, when present and not empty, are the only approval roles that
	// count.
	Roles []string `json:"roles,omitempty"`
}

// LoadPolicy reads a trust policy file, at most store.MaxRecord bytes (as
// much as a policy kept in a store); key files it names are read relative
// to the policy file's directory, at most MaxKeyFile bytes each. Both are
// the user's own files: they are read through a symbolic link, but must be
// regular files (store.ReadUserFile), so that a FIFO fails at once.
func LoadPolicy(path string) (*Policy, error) {
	data, err := store.ReadUserFile(path, store.MaxRecord)
	if err != nil {
		return nil, fmt.Errorf("trust policy: %w", err) // it names path
	}
	p, err := parsePolicy(data, filepath.Dir(path), true)
	if err != nil {
		return nil, fmt.Errorf("trust policy %s: %w", path, err)
	}
	return p, nil
}

// ParseKeptPolicy parses a trust policy kept in a store (what Canonical
// writes): as LoadPolicy parses a file (see parsePolicy), but every
// approver must be inline PEM. An entry that names a key file is refused
// and no file is opened, since bytes read back from a store must not make
// pinfs read local files (a key of the caller's, or a FIFO that never
// answers).
func ParseKeptPolicy(data []byte) (*Policy, error) {
	p, err := parsePolicy(data, "", false)
	if err != nil {
		return nil, fmt.Errorf("trust policy: %w", err)
	}
	return p, nil
}

// parsePolicy parses a trust policy:
//
//	{"approvers": ["alice.pub", "-----BEGIN PUBLIC KEY-----\n…"], "threshold": 1, "roles": ["approver"]}
//
// Key files named in it are read relative to dir when files is set, and
// refused otherwise. It refuses unknown fields, a missing or out-of-range
// threshold (it must be 1..number of approvers), an approver that is not
// an ed25519 public key or cannot be read, and the same key listed twice
// (so that the threshold always counts distinct keys).
func parsePolicy(data []byte, dir string, files bool) (*Policy, error) {
	var pf policyFile
	if err := strictJSON(data, &pf); err != nil {
		return nil, fmt.Errorf("not a policy: %v", err)
	}
	if len(pf.Approvers) == 0 {
		return nil, errors.New(`no "approvers"`)
	}
	p := &Policy{keys: map[string]ed25519.PublicKey{}}
	where := map[string]int{}
	for i, a := range pf.Approvers {
		pub, err := approverKey(a, dir, files)
		if err != nil {
			return nil, fmt.Errorf("approver %d: %w", i+1, err)
		}
		id := KeyID(pub)
		if j, dup := where[id]; dup {
			return nil, fmt.Errorf("approvers %d and %d are the same key %s", j, i+1, id)
		}
		where[id] = i + 1
		p.keys[id] = pub
		p.ids = append(p.ids, id)
	}
	slices.Sort(p.ids)
	if pf.Threshold == nil {
		return nil, errors.New(`no "threshold"`)
	}
	p.threshold = *pf.Threshold
	if p.threshold < 1 || p.threshold > len(p.ids) {
		return nil, fmt.Errorf("threshold %d is not between 1 and the number of approvers (%d)", p.threshold, len(p.ids))
	}
	for _, r := range pf.Roles {
		if strings.TrimSpace(r) == "" {
			return nil, errors.New("an empty role")
		}
		p.roles = append(p.roles, r)
	}
	slices.Sort(p.roles)
	p.roles = slices.Compact(p.roles)
	b, err := jcs.Marshal(policyFile{Approvers: p.ids, Threshold: &p.threshold, Roles: p.roles})
	if err != nil {
		return nil, err
	}
	p.digest = verify.SHA256(b)
	return p, nil
}

// approverKey parses an approver entry: inline PEM or, when files is set,
// a key file.
func approverKey(a, dir string, files bool) (ed25519.PublicKey, error) {
	if strings.HasPrefix(strings.TrimSpace(a), "-----BEGIN") {
		pub, err := ParsePublicKey([]byte(a))
		if err != nil {
			return nil, fmt.Errorf("inline key: %w", err)
		}
		return pub, nil
	}
	if a == "" {
		return nil, errors.New("empty key file name")
	}
	if !files {
		return nil, fmt.Errorf("names the key file %q: a policy kept in a store must carry its keys inline (PEM)", a)
	}
	path := a
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	return LoadPublicKey(path)
}

// Digest names the policy: the SHA-256 of the canonical JSON
// {"approvers":[<key ids, sorted>],"threshold":N,"roles":[<sorted>]} (roles
// omitted when any role counts). Two policy files that trust the same keys
// the same way have the same digest, however they list the keys.
func (p *Policy) Digest() verify.Digest { return p.digest }

// Threshold returns how many distinct approver keys must approve.
func (p *Policy) Threshold() int { return p.threshold }

// KeyIDs returns the ids of the approver keys, sorted.
func (p *Policy) KeyIDs() []string { return slices.Clone(p.ids) }

// Roles returns the roles that count, sorted; empty means any role.
func (p *Policy) Roles() []string { return slices.Clone(p.roles) }

// Keys returns the approver keys in key-id order.
func (p *Policy) Keys() []ed25519.PublicKey {
	keys := make([]ed25519.PublicKey, len(p.ids))
	for i, id := range p.ids {
		keys[i] = p.keys[id]
	}
	return keys
}

// Canonical returns the policy self-contained, to be kept in a store:
// canonical JSON with every approver key inline (PEM) in key-id order.
// ParseKeptPolicy(Canonical()) gives a policy with the same Digest.
func (p *Policy) Canonical() ([]byte, error) {
	pf := policyFile{Threshold: &p.threshold, Roles: p.roles}
	for _, pub := range p.Keys() {
		b, err := PublicKeyPEM(pub)
		if err != nil {
			return nil, err
		}
		pf.Approvers = append(pf.Approvers, string(b))
	}
	return jcs.Marshal(pf)
}

// Describe returns one line about a signature Check accepted.
func (p *Policy) Describe(sig Signature) string {
	s := fmt.Sprintf("key %s role %s at %s", sig.KeyID, sig.Approval.Role, sig.Approval.Time.UTC().Format("2006-01-02T15:04:05Z"))
	if sig.Approval.Approver != "" {
		s += " by " + sig.Approval.Approver
	}
	return s + " under policy " + p.digest.String()
}

// Check verifies envelopes for manifest under the policy. A key counts once,
// however many envelopes it signed, when at least one of them verifies under
// that key, is a statement naming exactly this manifest, carries a role the
// policy allows, and names a report for which reportOK returns nil (the
// caller fetches the report and checks that it is a passing report for this
// manifest). A tampered envelope, a key outside the policy, a statement for
// another manifest or a failing report do not count.
//
// Check returns the counted signatures, sorted by key id, and nil when at
// least Threshold distinct keys approve; otherwise the counted signatures
// and an error wrapping ErrNotApproved that says how many of how many and,
// on one line, why the others did not count.
func (p *Policy) Check(ctx context.Context, envelopes [][]byte, manifest verify.Digest, reportOK func(context.Context, verify.Digest) error) ([]Signature, error) {
	counted := map[string]Signature{}
	failed := map[string][]string{} // policy key id -> why its signatures did not count
	var other []string              // envelopes that no policy key signed
	for _, data := range envelopes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := "envelope " + verify.SHA256(data).Hex()[:12]
		env, err := decodeEnvelope(data)
		if err != nil {
			other = append(other, name+": "+err.Error())
			continue
		}
		claims := map[string]bool{}
		for _, s := range env.Signatures {
			claims[s.KeyID] = true
		}
		byPolicyKey := false
		for _, id := range p.ids {
			sig, err := p.accept(ctx, env, id, manifest, reportOK)
			if err == nil {
				byPolicyKey = true
				if _, dup := counted[id]; !dup {
					counted[id] = *sig
				}
				continue
			}
			if claims[id] {
				byPolicyKey = true
				if !slices.Contains(failed[id], err.Error()) {
					failed[id] = append(failed[id], err.Error())
				}
			}
		}
		if !byPolicyKey {
			other = append(other, name+": "+notInPolicy(claims))
		}
	}
	sigs := make([]Signature, 0, len(counted))
	for _, id := range p.ids {
		if sig, ok := counted[id]; ok {
			sigs = append(sigs, sig)
		}
	}
	if len(sigs) >= p.threshold {
		return sigs, nil
	}
	var why []string
	for _, id := range p.ids {
		if _, ok := counted[id]; !ok {
			why = append(why, failed[id]...)
		}
	}
	why = append(why, other...)
	if len(envelopes) == 0 {
		why = append(why, "no approvals recorded")
	} else if len(why) == 0 {
		why = append(why, "no other policy key signed")
	}
	return sigs, fmt.Errorf("%w: %d of %d required approvals: %s", ErrNotApproved, len(sigs), p.threshold, strings.Join(why, "; "))
}

// accept verifies env under the policy key id and checks what it says.
func (p *Policy) accept(ctx context.Context, env *dsse.Envelope, id string, manifest verify.Digest, reportOK func(context.Context, verify.Digest) error) (*Signature, error) {
	sig, err := verifyEnvelope(ctx, env, p.keys[id], id)
	if err != nil {
		return nil, err
	}
	if sig.Manifest != manifest {
		return nil, fmt.Errorf("key %s: approves manifest %s, not %s", id, sig.Manifest, manifest)
	}
	if len(p.roles) > 0 && !slices.Contains(p.roles, sig.Approval.Role) {
		return nil, fmt.Errorf("key %s: role %q is not one the policy accepts (%s)", id, sig.Approval.Role, strings.Join(p.roles, ", "))
	}
	if reportOK == nil {
		return nil, fmt.Errorf("key %s: report %s: no report check given", id, sig.Report)
	}
	if err := reportOK(ctx, sig.Report); err != nil {
		return nil, fmt.Errorf("key %s: report %s: %v", id, sig.Report, err)
	}
	return sig, nil
}

// notInPolicy says why an envelope counted for no policy key.
func notInPolicy(claims map[string]bool) string {
	var ids []string
	for id := range claims {
		if id != "" {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return "no valid signature by a policy key"
	}
	slices.Sort(ids)
	return "signed by " + strings.Join(ids, ", ") + ", not in the policy"
}
