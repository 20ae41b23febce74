package sign

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/jcs"
)

// PredicateType names the pinfs approval predicate in an in-toto Statement.
const PredicateType = "https://pinfs.dev/approval/v1"

// PayloadType is the DSSE payload type of an in-toto Statement.
const PayloadType = "application/vnd.in-toto+json"

// The names of the two subjects of an approval statement.
const (
	SubjectManifest = "manifest"
	SubjectReport   = "report"
)

// DefaultRole is the role of an Approval that names none.
const DefaultRole = "approver"

// ErrBadEnvelope is wrapped by Open for an envelope that does not verify
// under the key or does not hold a pinfs approval statement.
var ErrBadEnvelope = errors.New("invalid approval envelope")

// Approval is the predicate of an approval statement: who approved, in which
// role, when, and (optionally) for which purpose.
type Approval struct {
	Role     string    `json:"role"`               // e.g. "approver", "data-owner"; default "approver"
	Approver string    `json:"approver,omitempty"` // free text, e.g. user@host
	Time     time.Time `json:"time"`
	Purpose  string    `json:"purpose,omitempty"`
}

// Signature is what an envelope says once its signature checked out against
// the key named by KeyID. Only Open makes one.
type Signature struct {
	KeyID    string
	Manifest verify.Digest
	Report   verify.Digest
	Approval Approval
}

// Sign returns a DSSE envelope (canonical JSON) signed by s whose payload is
// an in-toto Statement v1 with exactly two subjects,
// {"name":"manifest","digest":{"sha256":<manifest hex>}} and
// {"name":"report","digest":{"sha256":<report hex>}}, predicate type
// PredicateType and the approval a as predicate. An empty role becomes
// DefaultRole and a zero time the current time; the time is kept in UTC to
// the second.
func (s *Signer) Sign(ctx context.Context, manifest, report verify.Digest, a Approval) ([]byte, error) {
	for _, d := range []verify.Digest{manifest, report} {
		if _, err := verify.ParseDigest(string(d)); err != nil {
			return nil, fmt.Errorf("sign: %w", err)
		}
	}
	if a.Role == "" {
		a.Role = DefaultRole
	}
	if a.Time.IsZero() {
		a.Time = time.Now()
	}
	a.Time = a.Time.UTC().Truncate(time.Second)
	payload, err := statement(manifest, report, a)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	es, err := dsse.NewEnvelopeSigner(dsseSigner{priv: s.priv, id: s.id})
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	env, err := es.SignPayload(ctx, PayloadType, payload)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	return jcs.Marshal(env)
}

// statement returns the canonical JSON of the approval statement. The
// Statement is the in-toto attestation library's own type, encoded with
// protojson as that library intends; its output is then canonicalized
// (protojson deliberately varies white space) so that the same approval
// always gives the same payload bytes.
func statement(manifest, report verify.Digest, a Approval) ([]byte, error) {
	aj, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	pred := &structpb.Struct{}
	if err := protojson.Unmarshal(aj, pred); err != nil {
		return nil, err
	}
	st := &intoto.Statement{
		Type: intoto.StatementTypeUri,
		Subject: []*intoto.ResourceDescriptor{
			{Name: SubjectManifest, Digest: map[string]string{"sha256": manifest.Hex()}},
			{Name: SubjectReport, Digest: map[string]string{"sha256": report.Hex()}},
		},
		PredicateType: PredicateType,
		Predicate:     pred,
	}
	if err := st.Validate(); err != nil {
		return nil, err
	}
	b, err := protojson.Marshal(st)
	if err != nil {
		return nil, err
	}
	return jcs.Canonicalize(b)
}

// Open parses a DSSE envelope and checks it against one public key, without
// any policy: some signature in it must verify under pub (over the DSSE
// pre-authentication encoding of payload type and payload), the payload type
// must be PayloadType, and the payload must be an in-toto Statement v1 of
// PredicateType with exactly the subjects "manifest" and "report", each with
// a sha256 digest, and an Approval as predicate (unknown predicate fields
// refused: a later version gets a new predicate type). Errors wrap
// ErrBadEnvelope and say why in one line.
func Open(ctx context.Context, envelope []byte, pub ed25519.PublicKey) (*Signature, error) {
	env, err := decodeEnvelope(envelope)
	if err == nil {
		var sig *Signature
		if sig, err = verifyEnvelope(ctx, env, pub, KeyID(pub)); err == nil {
			return sig, nil
		}
	}
	return nil, fmt.Errorf("%w: %v", ErrBadEnvelope, err)
}

// decodeEnvelope parses a DSSE envelope of PayloadType; it checks no
// signature.
func decodeEnvelope(data []byte) (*dsse.Envelope, error) {
	var env dsse.Envelope
	if err := strictJSON(data, &env); err != nil {
		return nil, fmt.Errorf("not a DSSE envelope: %v", err)
	}
	if env.PayloadType != PayloadType {
		return nil, fmt.Errorf("payload type %q, want %q", env.PayloadType, PayloadType)
	}
	return &env, nil
}

// verifyEnvelope checks env's signature under pub (whose KeyID is id) and
// then its statement. Errors begin with "key <id>:".
func verifyEnvelope(ctx context.Context, env *dsse.Envelope, pub ed25519.PublicKey, id string) (*Signature, error) {
	ev, err := dsse.NewEnvelopeVerifier(dsseVerifier{pub: pub, id: id})
	if err != nil {
		return nil, fmt.Errorf("key %s: %v", id, err)
	}
	accepted, payload, err := ev.VerifyAndDecode(ctx, env)
	if err != nil || len(accepted) == 0 {
		return nil, fmt.Errorf("key %s: signature invalid", id)
	}
	sig, err := parseStatement(payload)
	if err != nil {
		return nil, fmt.Errorf("key %s: signed %v", id, err)
	}
	sig.KeyID = id
	return sig, nil
}

// parseStatement checks a verified payload and returns what it says.
func parseStatement(payload []byte) (*Signature, error) {
	var st intoto.Statement
	if err := protojson.Unmarshal(payload, &st); err != nil {
		return nil, fmt.Errorf("a payload that is not an in-toto statement: %v", err)
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("an invalid in-toto statement: %v", err)
	}
	if st.GetType() != intoto.StatementTypeUri {
		return nil, fmt.Errorf("a statement of type %q, want %q", st.GetType(), intoto.StatementTypeUri)
	}
	if st.GetPredicateType() != PredicateType {
		return nil, fmt.Errorf("a predicate of type %q, want %q", st.GetPredicateType(), PredicateType)
	}
	var sig Signature
	seen := map[string]bool{}
	for _, sub := range st.GetSubject() {
		name := sub.GetName()
		var dst *verify.Digest
		switch name {
		case SubjectManifest:
			dst = &sig.Manifest
		case SubjectReport:
			dst = &sig.Report
		default:
			return nil, fmt.Errorf("a statement with subject %q; want only %q and %q", name, SubjectManifest, SubjectReport)
		}
		if seen[name] {
			return nil, fmt.Errorf("a statement with subject %q twice", name)
		}
		seen[name] = true
		if len(sub.GetDigest()) != 1 {
			return nil, fmt.Errorf("a statement whose subject %q has %d digests, want one sha256", name, len(sub.GetDigest()))
		}
		d, err := verify.ParseDigest("sha256:" + sub.GetDigest()["sha256"])
		if err != nil {
			return nil, fmt.Errorf("a statement whose subject %q has no valid sha256 digest", name)
		}
		*dst = d
	}
	if !seen[SubjectManifest] || !seen[SubjectReport] {
		return nil, fmt.Errorf("a statement without both subjects %q and %q", SubjectManifest, SubjectReport)
	}
	pj, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return nil, fmt.Errorf("an unreadable predicate: %v", err)
	}
	if err := strictJSON(pj, &sig.Approval); err != nil {
		return nil, fmt.Errorf("an invalid approval predicate: %v", err)
	}
	if sig.Approval.Role == "" || sig.Approval.Time.IsZero() {
		return nil, errors.New("an approval predicate without role or time")
	}
	return &sig, nil
}

// strictJSON decodes one JSON value into v, refusing unknown fields and
// trailing data.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}
