package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pinfs/pinfs/integration/s3test"
)

// reportOf runs pinfs validate --json and returns the printed report.
func reportOf(t testing.TB, env []string, code int, args ...string) (map[string]any, result) {
	t.Helper()
	r := wantExit(t, env, code, nil, append([]string{"validate", "--json"}, args...)...)
	var rep map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("validate --json printed no JSON object: %v\n%v", err, r)
	}
	return rep, r
}

func TestValidateS3Pin(t *testing.T) {
	t.Parallel()
	s := s3test.Start(t)
	env := s.Env()
	vs := dataset(t, s)
	st := "s3://store/pinfs"
	d := mustPinfs(t, env, "pin", "s3://data/ds/", "--store", st, "--purpose", "it").lastLine()

	r := wantExit(t, env, 0, []string{"state VALIDATED", "members 4", "members re-read (deep) 4", "unversioned 0",
		"sources 1 (1 with a listing)", "gate: none"}, "validate", d, "--store", st, "--deep")
	rd := labelled(t, r, "report")
	// The report is stored under its digest, and the marker names it.
	hexOf := func(d string) string { return strings.TrimPrefix(d, "sha256:") }
	if got := string(s.Get(t, "store", "pinfs/admission/sha256/"+hexOf(d)+"/validated/"+hexOf(rd), "")); got != rd+"\n" {
		t.Errorf("validated marker holds %q, want %q", got, rd+"\n")
	}
	var stored map[string]any
	if err := json.Unmarshal(s.Get(t, "store", "pinfs/reports/sha256/"+hexOf(rd), ""), &stored); err != nil ||
		stored["manifest"] != d || stored["ok"] != true || stored["deep"] != true {
		t.Errorf("stored report %v (%v)", stored, err)
	}

	// A gate that does not exist yet: validated without fences, said so.
	r = wantExit(t, env, 0, []string{"state VALIDATED"}, "validate", d, "--store", st, "--alias", "support")
	if !strings.Contains(r.stderr, "gate support does not exist yet") {
		t.Errorf("no word about the missing gate on stderr:\n%v", r)
	}

	// --json: the report with its digest; a new validation is a new report.
	rep, _ := reportOf(t, env, 0, d, "--store", st)
	metrics, _ := rep["metrics"].(map[string]any)
	if rep["ok"] != true || rep["manifest"] != d || rep["report"] == rd || !strings.HasPrefix(rep["report"].(string), "sha256:") ||
		metrics["members"] != 4.0 || metrics["orphanIds"] != 0.0 || !strings.HasPrefix(metrics["replayHash"].(string), "sha256:") {
		t.Errorf("validate --json: %v", rep)
	}

	// A child with the first as parent: the diff is in the report.
	s.Put(t, "data", "ds/test/new.txt", []byte("new member"))
	d2 := mustPinfs(t, env, "pin", "s3://data/ds/", "--store", st, "--parent", d).lastLine()
	wantExit(t, env, 0, []string{"parents 1 (1 resolvable)", "against " + d + ": added 1, removed 0, changed 0, moved 0"},
		"validate", d2, "--store", st)

	// Usage errors: not a digest, a bad gate name.
	wantExit(t, env, 2, []string{"digest"}, "validate", "latest", "--store", st)
	wantExit(t, env, 2, nil, "validate", d, "--store", st, "--alias", "Not/A/Gate")

	// A deleted pinned version: exit 1 naming it; the report is written
	// but the snapshot gains no marker.
	s.DeleteVersion(t, "data", "ds/val/c.txt", vs["val/c.txt"])
	rep, r = reportOf(t, env, 1, d, "--store", st, "--deep")
	if !strings.Contains(r.stderr, "version_missing") || !strings.Contains(r.stderr, "val/c.txt") ||
		strings.Contains(r.stderr, "train/") || len(strings.Split(strings.TrimSpace(r.stderr), "\n")) != 1 {
		t.Errorf("stderr should name only val/c.txt, in one line:\n%v", r)
	}
	if rep["ok"] != false {
		t.Errorf("report of a snapshot with a missing version: %v", rep)
	}
	r = wantExit(t, env, 1, []string{"not VALIDATED: 1 hard failures", "version_missing: val/c.txt"}, "validate", d, "--store", st)
	failed := strings.TrimPrefix(labelled(t, r, "report"), "sha256:") // a failing report is labelled too
	s.Get(t, "store", "pinfs/reports/sha256/"+failed, "")             // stored for the audit trail
	if _, err := s.Client(t).HeadObject(t.Context(), &s3.HeadObjectInput{
		Bucket: aws.String("store"), Key: aws.String("pinfs/admission/sha256/" + hexOf(d) + "/validated/" + failed),
	}); err == nil {
		t.Errorf("a failing report was marked validated")
	}
}

func TestValidateLocalDirPin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	for p, c := range map[string]string{"train/a": "alpha", "val/b": "beta"} {
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st := filepath.Join(dir, "store")
	d := mustPinfs(t, nil, "pin", src, "--store", st).lastLine()
	rd := labelled(t, wantExit(t, nil, 0, []string{"state VALIDATED", "members 2"}, "validate", d, "--store", st, "--deep"), "report")
	marker := filepath.Join(st, "admission", "sha256", strings.TrimPrefix(d, "sha256:"), "validated", strings.TrimPrefix(rd, "sha256:"))
	if b, err := os.ReadFile(marker); err != nil || string(b) != rd+"\n" {
		t.Errorf("marker %s: %q, %v", marker, b, err)
	}
	// Remove a pinned blob: exit 1 naming the member.
	if err := os.RemoveAll(filepath.Join(st, "cas")); err != nil {
		t.Fatal(err)
	}
	wantExit(t, nil, 1, []string{"version_missing", "train/a", "val/b"}, "validate", d, "--store", st)
}
