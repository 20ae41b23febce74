package runs

import (
	"bytes"
	"strings"
	"testing"
	"time"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/verify"
)

func TestExportInTotoIsAValidSLSAStatementOfTheRun(t *testing.T) {
	tab := testTable(t)
	run := testRun()
	r, s := showAndConsumed(t, run, tab, at(100), dead, true)
	b, err := ExportInToto(r, s, tab)
	if err != nil {
		t.Fatal(err)
	}
	var st intoto.Statement
	if err := protojson.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if err := st.Validate(); err != nil {
		t.Fatal(err)
	}
	// The subject is the run, its digest that of the report without members.
	r.Members = nil
	want, _ := ReportDigest(r)
	if len(st.Subject) != 1 || st.Subject[0].Name != "pinfs-run:r1" || "sha256:"+st.Subject[0].Digest["sha256"] != want {
		t.Fatalf("subject %v, want digest %s", st.Subject, want)
	}
	if st.PredicateType != "https://slsa.dev/provenance/v1" {
		t.Fatalf("predicate type %s", st.PredicateType)
	}
	pj, _ := protojson.Marshal(st.Predicate)
	var p slsa.Provenance
	if err := protojson.Unmarshal(pj, &p); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	deps := map[string]string{}
	for _, d := range p.BuildDefinition.ResolvedDependencies {
		deps[d.Name] = "sha256:" + d.Digest["sha256"]
	}
	if deps["manifest"] != string(testDigest) || deps["consumed"] != ConsumedDigest(s, tab) || len(deps) != 2 {
		t.Fatalf("materials %v", deps)
	}
	m := p.RunDetails.Metadata
	if p.RunDetails.Builder.Id != "https://pinfs.dev/run" || m.InvocationId != "r1" ||
		!m.StartedOn.AsTime().Equal(at(1)) || !m.FinishedOn.AsTime().Equal(at(60)) {
		t.Fatalf("run details %v", p.RunDetails)
	}
	again, _ := ExportInToto(r, s, tab)
	if !bytes.Equal(b, again) {
		t.Fatal("two exports differ")
	}
}

func TestExportInTotoSubjectChangesWithTheReport(t *testing.T) {
	tab := testTable(t)
	run := testRun()
	r, _ := Show(run, tab, at(100), dead, false)
	s, _ := Consumed(run, tab)
	before, _ := ExportInToto(r, s, tab)
	// Another integrity event makes another report, so another subject.
	run.Events = append(run.Events, integrity(runrecord.VersionMissing, 70, "c/w.bin"))
	r2, _ := Show(run, tab, at(100), dead, false)
	after, err := ExportInToto(r2, s, tab)
	if err != nil {
		t.Fatal(err)
	}
	subject := func(b []byte) string {
		var st intoto.Statement
		if err := protojson.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		return st.Subject[0].Digest["sha256"]
	}
	if subject(before) == subject(after) {
		t.Fatal("same subject digest for different reports")
	}
	// A run that has not ended has no finishedOn.
	r.State = runrecord.StateRunning
	b, _ := ExportInToto(r, s, tab)
	if strings.Contains(string(b), "finishedOn") || !strings.Contains(string(b), "startedOn") {
		t.Fatalf("running run: %s", b)
	}
}

// showAndConsumed returns run's report (Show) and its consumed set, which
// the exports take together.
func showAndConsumed(t *testing.T, run *runrecord.Run, tab *verify.Table, now time.Time, alive runrecord.Liveness, members bool) (*Report, *consumed.Set) {
	t.Helper()
	r, err := Show(run, tab, now, alive, members)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Consumed(run, tab)
	if err != nil {
		t.Fatal(err)
	}
	return r, s
}
