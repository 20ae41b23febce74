package runs

import (
	"encoding/json"
	"fmt"
	"strings"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/jcs"
)

// In-toto export constants.
const (
	// SubjectPrefix starts the name of the subject of an exported
	// Statement: "pinfs-run:<run-id>".
	SubjectPrefix = "pinfs-run:"
	// BuilderID is runDetails.builder.id of an exported provenance.
	BuilderID = "https://pinfs.dev/run"
	// BuildType is buildDefinition.buildType of an exported provenance.
	BuildType = "https://pinfs.dev/run/v1"
	// PredicateSLSA is the predicateType of an exported Statement: SLSA
	// provenance v1.
	PredicateSLSA = "https://slsa.dev/provenance/v1"
)

// ExportInToto returns the run of report r as an in-toto Statement v1
// whose predicate is SLSA provenance v1, for pipelines that consume
// SLSA-style provenance. Its subject is the run: name "pinfs-run:<run-id>"
// and, as digest, the SHA-256 of ReportDigest (the canonical report without
// its member list). Its materials (buildDefinition.resolvedDependencies)
// are the snapshot's manifest ("manifest", sha256 = the snapshot digest)
// and the consumed set ("consumed", sha256 = ConsumedDigest of s and t,
// with its member and byte counts as annotations). runDetails names the
// builder https://pinfs.dev/run, the run id as invocationId, and when the
// run started and, once it ended, finished. The output is canonical JSON
// (RFC 8785), so the same input always gives the same bytes.
func ExportInToto(r *Report, s *consumed.Set, t *verify.Table) ([]byte, error) {
	fail := func(err error) ([]byte, error) {
		return nil, fmt.Errorf("run %s: in-toto export: %w", r.RunID, err)
	}
	if err := s.Check(t.Len()); err != nil {
		return fail(err)
	}
	subject, err := ReportDigest(r)
	if err != nil {
		return fail(err)
	}
	cd := ConsumedDigest(s, t)
	sum := s.Summarize(t)
	ext, err := structpb.NewStruct(map[string]any{"run_id": r.RunID, "digest": string(r.Digest)})
	if err != nil {
		return fail(err)
	}
	notes, err := structpb.NewStruct(map[string]any{
		"members_opened": sum.MembersOpened, "members_full": sum.MembersFull, "bytes": sum.Bytes,
	})
	if err != nil {
		return fail(err)
	}
	meta := &slsa.BuildMetadata{InvocationId: r.RunID}
	if start, end, ok := span(r); ok {
		meta.StartedOn = timestamppb.New(start)
		if !end.IsZero() {
			meta.FinishedOn = timestamppb.New(end)
		}
	}
	if p := r.Permit; p != nil {
		ext.Fields["purpose"] = structpb.NewStringValue(p.Purpose)
	}
	prov := &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{
			BuildType:          BuildType,
			ExternalParameters: ext,
			ResolvedDependencies: []*intoto.ResourceDescriptor{
				{Name: "manifest", Digest: map[string]string{"sha256": r.Digest.Hex()}},
				{Name: "consumed", Digest: map[string]string{"sha256": strings.TrimPrefix(cd, "sha256:")}, Annotations: notes},
			},
		},
		RunDetails: &slsa.RunDetails{Builder: &slsa.Builder{Id: BuilderID}, Metadata: meta},
	}
	if err := prov.Validate(); err != nil {
		return fail(err)
	}
	pj, err := protojson.Marshal(prov)
	if err != nil {
		return fail(err)
	}
	pred := &structpb.Struct{}
	if err := protojson.Unmarshal(pj, pred); err != nil {
		return fail(err)
	}
	st := &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []*intoto.ResourceDescriptor{{Name: SubjectPrefix + r.RunID, Digest: map[string]string{"sha256": strings.TrimPrefix(subject, "sha256:")}}},
		PredicateType: PredicateSLSA,
		Predicate:     pred,
	}
	if err := st.Validate(); err != nil {
		return fail(err)
	}
	b, err := protojson.Marshal(st)
	if err != nil {
		return fail(err)
	}
	return jcs.Canonicalize(b)
}

// ReportDigest returns "sha256:<hex>" of r without its member list, as
// canonical JSON (RFC 8785): the subject digest of ExportInToto.
func ReportDigest(r *Report) (string, error) {
	c := *r
	c.Members = nil
	b, err := json.Marshal(&c)
	if err != nil {
		return "", err
	}
	if b, err = jcs.Canonicalize(b); err != nil {
		return "", err
	}
	return string(verify.SHA256(b)), nil
}
