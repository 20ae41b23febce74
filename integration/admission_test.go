package integration

// Admission end to end through the pinfs binary, on a local directory store
// and on a versitygw S3 store: pin -> validate -> approve -> alias set ->
// admit -> mount --require-permit, the refusals on the way, signatures
// broken after signing, and fences. The gate race is admission_race_test.go.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pinfs/pinfs/integration/fusetest"
	"github.com/pinfs/pinfs/integration/s3test"
)

// admStore is one store kind the admission tests run on: where pin reads,
// where the store and run records are, and how to change them behind
// pinfs's back.
type admStore struct {
	env     []string
	source  string   // what pin reads: a directory or s3://data/ds/
	store   string   // --store
	records []string // run records to admit into: a local file, and for S3 also s3://…
	work    string
	put     func(t testing.TB, rel string, b []byte) // add or overwrite a source file
	del     func(t testing.TB, rel string)           // remove a source file
	get     func(t testing.TB, key string) []byte    // a store key's current bytes
	replace func(t testing.TB, key string, b []byte) // new bytes for a store key: a file rewritten, a new S3 version
	s3      *s3test.Server                           // the S3 server; nil for a local store
}

// admSource is the dataset every admission test starts from.
func admSource(t testing.TB) map[string][]byte {
	return map[string][]byte{
		"train/a.bin": randomBytes(t, 100_000),
		"train/b.txt": []byte("bravo\n"),
		"val/c.txt":   []byte("charlie\n"),
	}
}

// localAdmStore is a local directory source and store with a local run record.
func localAdmStore(t *testing.T) *admStore {
	work := t.TempDir()
	a := &admStore{source: filepath.Join(work, "src"), store: filepath.Join(work, "store"),
		records: []string{filepath.Join(work, "runs.jsonl")}, work: work}
	a.put = func(t testing.TB, rel string, b []byte) {
		p := filepath.Join(a.source, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a.del = func(t testing.TB, rel string) {
		if err := os.Remove(filepath.Join(a.source, filepath.FromSlash(rel))); err != nil {
			t.Fatal(err)
		}
	}
	a.get = func(t testing.TB, key string) []byte {
		b, err := os.ReadFile(filepath.Join(a.store, filepath.FromSlash(key)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a.replace = func(t testing.TB, key string, b []byte) { tamper(t, a.store, key, func([]byte) []byte { return b }) }
	return a
}

// s3AdmStore is a versioned bucket source and an S3 store on versitygw,
// with a local and an S3 run record.
func s3AdmStore(t *testing.T) *admStore {
	s := s3test.Start(t)
	s.CreateBucket(t, "data", true)
	s.CreateBucket(t, "store", true)
	work := t.TempDir()
	return &admStore{env: s.Env(), source: "s3://data/ds/", store: "s3://store/pinfs", work: work, s3: s,
		records: []string{filepath.Join(work, "runs.jsonl"), "s3://store/records"},
		put:     func(t testing.TB, rel string, b []byte) { s.Put(t, "data", "ds/"+rel, b) },
		del: func(t testing.TB, rel string) {
			if _, err := s.Client(t).DeleteObject(t.Context(), &s3.DeleteObjectInput{
				Bucket: aws.String("data"), Key: aws.String("ds/" + rel)}); err != nil {
				t.Fatal(err)
			}
		},
		get:     func(t testing.TB, key string) []byte { return s.Get(t, "store", "pinfs/"+key, "") },
		replace: func(t testing.TB, key string, b []byte) { s.Put(t, "store", "pinfs/"+key, b) },
	}
}

// eachStore runs f on a fresh local store and a fresh S3 store, with the
// admission dataset in the source.
func eachStore(t *testing.T, f func(t *testing.T, a *admStore, data map[string][]byte)) {
	for _, kind := range []struct {
		name string
		new  func(*testing.T) *admStore
	}{{"local", localAdmStore}, {"s3", s3AdmStore}} {
		t.Run(kind.name, func(t *testing.T) {
			a := kind.new(t)
			data := admSource(t)
			for rel, b := range data {
				a.put(t, rel, b)
			}
			f(t, a, data)
		})
	}
}

// signers are two key pairs: alice signs; bob never does. policy trusts
// alice, bobPolicy only bob.
type signers struct {
	aliceKey, aliceID, policy, bobPolicy string
}

func newSigners(t testing.TB) *signers {
	t.Helper()
	dir := t.TempDir()
	r := mustPinfs(t, nil, "key", "generate", filepath.Join(dir, "alice"))
	mustPinfs(t, nil, "key", "generate", filepath.Join(dir, "bob"))
	s := &signers{aliceKey: filepath.Join(dir, "alice.key"), policy: filepath.Join(dir, "policy.json"), bobPolicy: filepath.Join(dir, "bob.json")}
	if _, id, ok := strings.Cut(r.stdout, "key id"); ok {
		s.aliceID = strings.TrimSpace(id)
	}
	if !strings.HasPrefix(s.aliceID, "sha256:") {
		t.Fatalf("key generate printed no key id: %v", r)
	}
	for p, pub := range map[string]string{s.policy: "alice.pub", s.bobPolicy: "bob.pub"} {
		if err := os.WriteFile(p, fmt.Appendf(nil, `{"approvers": [%q], "threshold": 1}`, pub), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// pinAt pins a's source for purpose at the given watermarks.
func (a *admStore) pinAt(t testing.TB, purpose string, tombstone, benchmark int) string {
	t.Helper()
	d := mustPinfs(t, a.env, "pin", a.source, "--store", a.store, "--purpose", purpose,
		"--tombstone-watermark", fmt.Sprint(tombstone), "--benchmark-fence", fmt.Sprint(benchmark)).lastLine()
	if !strings.HasPrefix(d, "sha256:") || len(d) != 71 {
		t.Fatalf("pin printed %q, not a digest", d)
	}
	return d
}

// candidate pins the source at the watermarks and approves it with
// alice's key, which validates it against gate: an APPROVED snapshot with
// one passing report. It returns the manifest and the envelope digest.
func (a *admStore) candidate(t testing.TB, s *signers, gate, purpose string, tombstone, benchmark int) (d, env string) {
	t.Helper()
	d = a.pinAt(t, purpose, tombstone, benchmark)
	env = labelled(t, mustPinfs(t, a.env, "approve", d, "--store", a.store, "--key", s.aliceKey, "--alias", gate), "envelope")
	return d, env
}

// labelled returns the digest on r's last line, "label sha256:…" (pinfs
// validate's report, pinfs approve's envelope).
func labelled(t testing.TB, r result, label string) string {
	t.Helper()
	d, ok := strings.CutPrefix(strings.TrimSpace(r.lastLine()), label+" ")
	if !ok || !strings.HasPrefix(d, "sha256:") || len(d) != 71 {
		t.Fatalf("pinfs: the last line is not %q sha256:<64 hex>:\n%v", label, r)
	}
	return d
}

// refused runs pinfs, wants exit code with every string of want in its
// output, and the reason on one line of stderr.
func refused(t testing.TB, env []string, code int, want []string, args ...string) result {
	t.Helper()
	r := wantExit(t, env, code, want, args...)
	if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || lines[0] == "" {
		t.Errorf("pinfs %s: the reason is not one line of stderr: %q", strings.Join(args, " "), r.stderr)
	}
	return r
}

// jsonOf runs pinfs, which must exit 0, and decodes its stdout into v.
func jsonOf(t testing.TB, env []string, v any, args ...string) {
	t.Helper()
	r := mustPinfs(t, env, args...)
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("pinfs %s printed no JSON: %v\n%v", strings.Join(args, " "), err, r)
	}
}

// statusOf is the part of pinfs status --json the tests look at.
type statusOf struct {
	State      string
	Signatures []struct {
		KeyID      string
		ValidUnder []string
	}
	Aliases []struct {
		Gate        string
		Generations []int64
		Current     bool
	}
}

func (a *admStore) status(t testing.TB, d string, policy string) statusOf {
	t.Helper()
	var st statusOf
	jsonOf(t, a.env, &st, "status", d, "--store", a.store, "--json", "--policy", policy)
	return st
}

// gateRecord is the part of a gate record the tests look at.
type gateRecord struct {
	Generation                         int64
	Digest, Op, Prev                   string
	TombstoneWatermark, BenchmarkFence int64
}

func (a *admStore) show(t testing.TB, gate string) gateRecord {
	t.Helper()
	var r gateRecord
	jsonOf(t, a.env, &r, "alias", "show", gate, "--store", a.store, "--json")
	return r
}

// mountPermitted mounts d for run runID with --require-permit (and extra
// flags), reads file and compares it with want, and unmounts.
func (a *admStore) mountPermitted(t *testing.T, d, record, runID, file string, want []byte, extra ...string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := startMount(t, a.env, dir, append([]string{d, dir, "--store", a.store, "--cache-dir", filepath.Join(a.work, "cache"),
		"--run-record", record, "--run-id", runID, "--require-permit"}, extra...)...)
	if b, err := readFile(t, filepath.Join(dir, file)); err != nil || !bytes.Equal(b, want) {
		t.Fatalf("read %s of %s through run %s's mount: %d bytes, %v", file, d, runID, len(b), err)
	}
	m.stop(t, 10*time.Second)
	if code := m.exitCode(t, 5*time.Second); code != 0 {
		t.Fatalf("the mount of run %s exited %d", runID, code)
	}
}

// mountRefused wants pinfs mount to exit code with want and mount nothing.
func (a *admStore) mountRefused(t *testing.T, code int, want []string, target string, flags ...string) {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() { fusetest.ForceUnmount(t, dir) }) // should it wrongly mount
	refused(t, a.env, code, want, append([]string{"mount", target, dir, "--store", a.store,
		"--cache-dir", filepath.Join(a.work, "cache"), "--foreground"}, flags...)...)
	if fusetest.Mounted(dir) {
		t.Fatalf("pinfs mount %s %v refused but mounted", target, flags)
	}
}

func hexOf(d string) string { return strings.TrimPrefix(d, "sha256:") }

// TestAdmissionWalkThrough: pin -> validate -> approve -> alias set ->
// resolve -> admit -> mount --require-permit --policy, with the refusals
// each step makes when its precondition is missing.
func TestAdmissionWalkThrough(t *testing.T) {
	t.Parallel()
	fusetest.Require(t)
	s := newSigners(t)
	eachStore(t, func(t *testing.T, a *admStore, data map[string][]byte) {
		st := a.store
		d := a.pinAt(t, "support-v3", 7, 2)
		if got := a.status(t, d, s.policy).State; got != "BUILDING" {
			t.Errorf("state after pin: %s, want BUILDING", got)
		}
		// approve validates itself unless given --report, which must name
		// a passing report of d.
		refused(t, a.env, 1, []string{"not VALIDATED"}, "approve", d, "--store", st, "--key", s.aliceKey, "--report", d)

		r := mustPinfs(t, a.env, "validate", d, "--store", st, "--alias", "support")
		rd := labelled(t, r, "report")
		if !strings.Contains(r.stdout, "state VALIDATED") {
			t.Fatalf("validate: no report digest on the last line:\n%v", r)
		}
		var rep map[string]any
		if err := json.Unmarshal(a.get(t, "reports/sha256/"+hexOf(rd)), &rep); err != nil || rep["manifest"] != d || rep["ok"] != true {
			t.Fatalf("stored report %s: %v (%v)", rd, rep, err)
		}
		if got := a.status(t, d, s.policy).State; got != "VALIDATED" {
			t.Errorf("state after validate: %s, want VALIDATED", got)
		}

		mustPinfs(t, a.env, "approve", d, "--store", st, "--key", s.aliceKey)
		sts := a.status(t, d, s.policy)
		if sts.State != "APPROVED" || len(sts.Signatures) != 1 || sts.Signatures[0].KeyID != s.aliceID || len(sts.Signatures[0].ValidUnder) != 1 {
			t.Fatalf("status after approve: %+v", sts)
		}
		if got := a.status(t, d, s.bobPolicy).State; got != "VALIDATED" {
			t.Errorf("state under a policy whose key did not sign: %s, want VALIDATED", got)
		}

		// A policy whose key did not sign: nothing activates, verifies or mounts.
		refused(t, a.env, 1, []string{"not approved"}, "alias", "set", "support", d, "--store", st, "--policy", s.bobPolicy)
		wantExit(t, a.env, 1, []string{"not approved", "verify: FAILED"}, "verify", d, "--store", st, "--policy", s.bobPolicy)
		a.mountRefused(t, 1, []string{"not approved"}, d, "--policy", s.bobPolicy)
		refused(t, a.env, 1, []string{"gate support"}, "resolve", "support", "--store", st)
		// Names are not digests.
		refused(t, a.env, 2, []string{"digests only"}, "alias", "set", "support", "latest", "--store", st, "--policy", s.policy)
		a.mountRefused(t, 2, []string{"digests only"}, "latest")

		r = mustPinfs(t, a.env, "alias", "set", "support", d, "--store", st, "--policy", s.policy)
		if !strings.Contains(r.stdout, "support generation 1 -> "+d) {
			t.Errorf("alias set printed %q", r.stdout)
		}
		sts = a.status(t, d, s.policy)
		if sts.State != "ACTIVE" || len(sts.Aliases) != 1 || sts.Aliases[0].Gate != "support" ||
			!slices.Equal(sts.Aliases[0].Generations, []int64{1}) || !sts.Aliases[0].Current {
			t.Errorf("status after alias set: %+v", sts)
		}
		if got := strings.TrimSpace(mustPinfs(t, a.env, "resolve", "support", "--store", st).stdout); got != d {
			t.Errorf("resolve support: %q, want %s", got, d)
		}
		if g := a.show(t, "support"); g != (gateRecord{Generation: 1, Digest: d, Op: "set", TombstoneWatermark: 7, BenchmarkFence: 2}) {
			t.Errorf("alias show support: %+v", g)
		}
		wantExit(t, a.env, 0, []string{"verify: OK"}, "verify", d, "--store", st, "--policy", s.policy)

		for i, rec := range a.records {
			run := fmt.Sprintf("run-%d", i)
			args := []string{"admit", "support", "--purpose", "support-v3", "--store", st, "--run-record", rec}
			refused(t, a.env, 1, []string{`purpose "support-v3", not "support-v4"`}, append(args[:2:2], "--purpose", "support-v4",
				"--store", st, "--run-record", rec, "--run-id", run)...)
			a.mountRefused(t, 1, []string{"holds no permit"}, d, "--run-record", rec, "--run-id", run, "--require-permit")
			if got := strings.TrimSpace(mustPinfs(t, a.env, append(args, "--run-id", run)...).stdout); got != run+" "+d {
				t.Errorf("admit printed %q, want %q", got, run+" "+d)
			}
			a.mountPermitted(t, d, rec, run, "train/a.bin", data["train/a.bin"], "--policy", s.policy)
		}
	})
}

// TestAdmissionTamperedAfterSigning: a report or a manifest replaced in the
// store after it was signed, or an envelope modified in place, is refused
// by verify --policy, alias set and admit.
func TestAdmissionTamperedAfterSigning(t *testing.T) {
	t.Parallel()
	s := newSigners(t)
	eachStore(t, func(t *testing.T, a *admStore, _ map[string][]byte) {
		for _, tc := range []struct {
			name string
			key  func(d, env, report string) string
			f    func(t testing.TB, b []byte) []byte
			want string
		}{
			{"report", func(_, _, rd string) string { return "reports/sha256/" + hexOf(rd) }, forgeReport, "report"},
			{"manifest", func(d, _, _ string) string { return "manifests/sha256/" + hexOf(d) },
				func(t testing.TB, b []byte) []byte {
					return bytes.Replace(b, []byte(`"purpose":"tamper-manifest"`), []byte(`"purpose":"tamper-manifesx"`), 1)
				}, "invalid snapshot"},
			{"envelope", func(d, env, _ string) string { return "admission/sha256/" + hexOf(d) + "/approvals/" + hexOf(env) }, forgeSignature, "not approved"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				gate, purpose := "tamper-"+tc.name, "tamper-"+tc.name
				d, env := a.candidate(t, s, gate, purpose, 0, 0)
				var sts struct{ Reports []struct{ Digest string } }
				jsonOf(t, a.env, &sts, "status", d, "--store", a.store, "--json")
				if len(sts.Reports) != 1 {
					t.Fatalf("status of %s: %d passing reports, want 1", d, len(sts.Reports))
				}
				mustPinfs(t, a.env, "alias", "set", gate, d, "--store", a.store, "--policy", s.policy)

				key := tc.key(d, env, sts.Reports[0].Digest)
				b := a.get(t, key)
				forged := tc.f(t, b)
				if bytes.Equal(forged, b) {
					t.Fatalf("test setup: %s unchanged", key)
				}
				a.replace(t, key, forged)

				wantExit(t, a.env, 1, []string{tc.want}, "verify", d, "--store", a.store, "--policy", s.policy)
				refused(t, a.env, 1, []string{tc.want}, "alias", "set", gate+"-2", d, "--store", a.store, "--policy", s.policy)
				refused(t, a.env, 1, []string{tc.want}, "admit", gate, "--purpose", purpose, "--store", a.store, "--run-record", a.records[0])
				refused(t, a.env, 1, []string{tc.want}, "admit", d, "--purpose", purpose, "--store", a.store,
					"--run-record", a.records[0], "--policy", s.policy)
			})
		}
	})
}

// forgeReport rewrites a validation report with one metric changed, as a
// forger would: valid JSON, plausible content, another digest.
func forgeReport(t testing.TB, b []byte) []byte {
	var rep map[string]any
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	rep["metrics"].(map[string]any)["members"] = 999
	out, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// forgeSignature flips one bit of the envelope's signature and keeps the
// envelope well formed.
func forgeSignature(t testing.TB, b []byte) []byte {
	var env map[string]any
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	sig := env["signatures"].([]any)[0].(map[string]any)
	raw, err := base64.StdEncoding.DecodeString(sig["sig"].(string))
	if err != nil {
		t.Fatal(err)
	}
	raw[0] ^= 1
	sig["sig"] = base64.StdEncoding.EncodeToString(raw)
	out, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
