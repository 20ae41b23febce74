// Package sign signs and checks approvals of pinfs snapshots.
//
// An approval is a DSSE envelope (github.com/secure-systems-lab/go-securesystemslib/dsse)
// whose payload is an in-toto Statement v1 (github.com/in-toto/attestation/go/v1)
// with exactly two subjects, the manifest and its validation report, each by
// SHA-256 digest, predicate type PredicateType and an Approval (role, who,
// when, purpose) as predicate. Keys are ed25519: PREFIX.key holds the private
// key (PKCS#8 PEM, mode 0600) and PREFIX.pub the public key (PKIX PEM). A key
// is named by KeyID, the SHA-256 of its PKIX encoding.
//
// # What signs what
//
// The signature covers the DSSE pre-authentication encoding of the payload
// type and the statement bytes, so a changed statement, a changed payload
// type, or a statement moved to another manifest no longer verifies. The
// manifest itself is never changed: envelopes are stored beside it.
//
// # Trust policy
//
// A Policy lists the approver keys and a threshold; Policy.Check counts
// distinct keys, never envelopes, so one key signing twice is one approval.
// An envelope counts for a key only when its signature verifies under that
// key, its statement names the manifest being checked, its role is allowed,
// and its report passes the caller's check. Only LoadPolicy and
// ParseKeptPolicy make a Policy, and only Open and Policy.Check make a Signature.
package sign
