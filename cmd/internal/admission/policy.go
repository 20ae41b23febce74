package admission

import (
	"context"
	"errors"
	"fmt"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/gate"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/sign"
)

// ErrNoPolicy is wrapped when a check needs a trust policy and none was
// given or kept with the gate.
var ErrNoPolicy = errors.New("no trust policy: pass --policy FILE")

// policyKey is where a trust policy is kept, self-contained (public keys
// inline) and named by its digest.
func policyKey(d verify.Digest) string { return "policies/sha256/" + d.Hex() }

// SavePolicy keeps p in the store, self-contained (every key inline, as
// LoadPolicy requires), so that a gate can name it by its digest
// (p.Digest()), which it returns.
func SavePolicy(ctx context.Context, st store.Blobs, p *sign.Policy) (verify.Digest, error) {
	b, err := p.Canonical()
	if err != nil {
		return "", err
	}
	d := p.Digest()
	if q, err := sign.ParseKeptPolicy(b); err != nil || q.Digest() != d {
		return "", fmt.Errorf("trust policy %s: its self-contained form does not parse back to it: %v", d, err)
	}
	if err := st.Put(ctx, policyKey(d), b); err != nil {
		return "", fmt.Errorf("store trust policy %s: %w", d, err)
	}
	return d, nil
}

// LoadPolicy reads the policy with digest d from the store and checks
// that it is the policy d names. A kept policy must carry its keys inline:
// one that names a key file is refused, and no local file is opened.
func LoadPolicy(ctx context.Context, st store.Blobs, d verify.Digest) (*sign.Policy, error) {
	b, err := st.Get(ctx, policyKey(d))
	if err != nil {
		return nil, fmt.Errorf("trust policy %s: %w", d, err)
	}
	p, err := sign.ParseKeptPolicy(b)
	if err != nil {
		return nil, fmt.Errorf("trust policy %s: %w", d, err)
	}
	if p.Digest() != d {
		return nil, fmt.Errorf("trust policy %s: the stored policy is %s: %w", d, p.Digest(), verify.ErrInvalid)
	}
	return p, nil
}

// PolicyInForce returns the trust policy a check through gate record rec
// (nil: through no gate) is made under, and its digest: given when set,
// else the policy rec keeps (LoadPolicy), else nil and "": no policy is
// in force, and a check that needs one fails with ErrNoPolicy.
func PolicyInForce(ctx context.Context, st store.Blobs, given *sign.Policy, rec *gate.Record) (*sign.Policy, verify.Digest, error) {
	switch {
	case given != nil:
		return given, given.Digest(), nil
	case rec == nil || rec.Policy == "":
		return nil, "", nil
	}
	p, err := LoadPolicy(ctx, st, rec.Policy)
	return p, rec.Policy, err
}

// policyFor returns the policy a gate change or an admission checks
// approvals under and its digest: the one in force (PolicyInForce), else
// ErrNoPolicy. A given p is kept in the store first, so that the new gate
// record can name it.
func policyFor(ctx context.Context, st store.Blobs, p *sign.Policy, cur *gate.Record) (*sign.Policy, verify.Digest, error) {
	if p != nil {
		if _, err := SavePolicy(ctx, st, p); err != nil {
			return nil, "", err
		}
	}
	p, d, err := PolicyInForce(ctx, st, p, cur)
	if err == nil && p == nil {
		err = ErrNoPolicy
	}
	return p, d, err
}
