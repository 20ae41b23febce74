package integration

import (
	"bytes"
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
)

// permitCase is one store and run record for the --require-permit tests:
// digest is APPROVED and active in gate prod; other is pinned for the
// same purpose and never approved.
type permitCase struct {
	*admStore
	record       string // a local file or s3://…
	cache        string
	digest       string
	other        string
	policy       string                                      // the policy file that approved digest
	policyDigest string                                      // its digest, which gate prod keeps
	malloryKey   string                                      // a key that policy does not trust
	malloryPol   string                                      // a policy file trusting only that key
	file         string                                      // a member of digest
	want         []byte                                      // its bytes
	runKeys      func(t testing.TB, runID string) []string   // what the record holds of the run
	plant        func(t testing.TB, runID, d, permit string) // hand-writes permit (JSON) for d as the run's binding
	wantAfterTwo []string                                    // run record entries after two mounts
}

// permitPurpose is the purpose of the permit tests' snapshots.
const permitPurpose = "integration"

// newPermitCase pins, validates, approves and activates a's source in
// gate prod, and pins an unapproved other snapshot; record is the run
// record the case uses.
func newPermitCase(t *testing.T, a *admStore, record string) *permitCase {
	s := newSigners(t)
	data := admSource(t)
	for rel, b := range data {
		a.put(t, rel, b)
	}
	d, _ := a.candidate(t, s, "prod", permitPurpose, 0, 0)
	mustPinfs(t, a.env, "alias", "set", "prod", d, "--store", a.store, "--policy", s.policy)
	var g struct{ Policy string }
	jsonOf(t, a.env, &g, "alias", "show", "prod", "--store", a.store, "--json")
	a.put(t, "train/extra.txt", []byte("never approved\n"))
	other := a.pinAt(t, permitPurpose, 0, 0)
	if other == d || !strings.HasPrefix(g.Policy, "sha256:") {
		t.Fatalf("test setup: other %s, digest %s, gate policy %q", other, d, g.Policy)
	}
	return &permitCase{admStore: a, record: record, cache: filepath.Join(a.work, "cache"), digest: d, other: other,
		policy: s.policy, policyDigest: g.Policy, malloryKey: filepath.Join(filepath.Dir(s.bobPolicy), "bob.key"), malloryPol: s.bobPolicy,
		file: "train/a.bin", want: data["train/a.bin"]}
}

// forge hand-writes, as anyone who can append to the run record can, a
// permit for run runID and digest d through gate ("" for none) at
// generation gen under the gate's policy, as runrecord.Admit writes one
// (the package is internal to cmd/, so this test writes the record's
// format itself, which also pins that format).
func (c *permitCase) forge(t testing.TB, runID, d, gate string, gen int) {
	t.Helper()
	c.plant(t, runID, d, fmt.Sprintf(`{"run_id":%q,"digest":%q,"purpose":%q,"gate":%q,"generation":%d,"tombstone_watermark":0,"benchmark_fence":0,"policy":%q,"time":%q}`,
		runID, d, permitPurpose, gate, gen, c.policyDigest, time.Now().UTC().Format(time.RFC3339Nano)))
}

// plantLocal appends a permit event for run runID and digest d, as the
// run's first line, to the local record file.
func plantLocal(t testing.TB, record, runID, d, permit string) {
	t.Helper()
	line := fmt.Sprintf(`{"time":%q,"run_id":%q,"digest":%q,"event":"permit","seq":1,"permit":%s}`+"\n",
		time.Now().UTC().Format(time.RFC3339Nano), runID, d, permit)
	f, err := os.OpenFile(record, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line); err != nil {
		t.Fatal(err)
	}
}

// mountArgs is the command line of a pinfs mount of d at dir for run
// runID.
func (c *permitCase) mountArgs(d, dir, runID string, extra ...string) []string {
	return append([]string{"mount", d, dir, "--store", c.store, "--cache-dir", c.cache,
		"--run-record", c.record, "--run-id", runID}, extra...)
}

// refused checks that mounting d for run runID with --require-permit (and
// extra flags) exits 1 with want on one line, mounts nothing and writes
// nothing of the run.
func (c *permitCase) refused(t *testing.T, d, runID, want string, background bool, extra ...string) {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() { fusetest.ForceUnmount(t, dir) }) // should the mount wrongly serve
	before := c.runKeys(t, runID)
	args := c.mountArgs(d, dir, runID, append([]string{"--require-permit"}, extra...)...)
	if !background {
		args = append(args, "--foreground")
	}
	r := wantExit(t, c.env, 1, []string{want}, args...)
	if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n > 0 {
		t.Errorf("the refusal is not one line: %q", r.stderr)
	}
	if fusetest.Mounted(dir) {
		t.Fatalf("mounted %s for run %s, whose permit does not allow it: %v", d, runID, r)
	}
	if after := c.runKeys(t, runID); !slices.Equal(after, before) {
		t.Fatalf("a refused mount wrote to run %s's record: %v, before %v", runID, after, before)
	}
}

// serves mounts run runID with --require-permit (and extra flags), reads
// c.file and stops.
func (c *permitCase) serves(t *testing.T, runID string, extra ...string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d := startMount(t, c.env, dir, c.mountArgs(c.digest, dir, runID, append([]string{"--require-permit"}, extra...)...)[1:]...)
	if b, err := readFile(t, filepath.Join(dir, c.file)); err != nil || !bytes.Equal(b, c.want) {
		t.Fatalf("read %s through the permitted mount: %v", c.file, err)
	}
	d.stop(t, 10*time.Second)
	if code := d.exitCode(t, time.Second); code != 0 {
		t.Fatalf("permitted mount exited %d", code)
	}
}

// admit runs pinfs admit prod for run runID (and extra flags).
func (c *permitCase) admit(runID string, extra ...string) []string {
	return append([]string{"admit", "prod", "--purpose", permitPurpose, "--store", c.store, "--run-record", c.record, "--run-id", runID}, extra...)
}

// checkRequirePermit runs the --require-permit cases on c.
func checkRequirePermit(t *testing.T, c *permitCase) {
	wantExit(t, c.env, 2, []string{"--require-permit needs --run-id"},
		"mount", c.digest, t.TempDir(), "--store", c.store, "--cache-dir", c.cache, "--run-record", c.record, "--require-permit")

	c.refused(t, c.digest, "job-none", "run job-none holds no permit", false)
	c.refused(t, c.digest, "job-none", "run job-none holds no permit", true) // the daemon gets the flag too

	c.forge(t, "job-other", c.other, "", 0)
	c.refused(t, c.digest, "job-other", "run job-other's permit is for "+c.other+" not "+c.digest, false)

	// The reproduction: a hand-written permit for the unapproved snapshot,
	// claiming gate prod's generation 1.
	c.forge(t, "job-42", c.other, "prod", 1)
	r := refused(t, c.env, 1, []string{"run job-42's permit does not check out", "gate prod generation 1 points at"}, c.admit("job-42", "--policy", c.policy)...)
	if strings.Contains(r.stdout, c.other) {
		t.Errorf("admit printed the forged permit's digest: %v", r)
	}
	c.refused(t, c.other, "job-42", "run job-42's permit does not check out", false)
	c.refused(t, c.other, "job-42", "run job-42's permit does not check out", false, "--policy", c.policy)
	// By digest, naming the gate's policy, under which other is not approved.
	c.forge(t, "job-43", c.other, "", 0)
	c.refused(t, c.other, "job-43", "not approved", true, "--policy", c.policy)

	// Mallory, who can write the store, keeps a policy of her own there,
	// approves other under it and admits job-88 by digest with it: a permit
	// by digest checks out only under the mount's own --policy.
	mustPinfs(t, c.env, "validate", c.other, "--store", c.store)
	mustPinfs(t, c.env, "approve", c.other, "--store", c.store, "--key", c.malloryKey)
	mustPinfs(t, c.env, "admit", c.other, "--purpose", permitPurpose, "--store", c.store, "--run-record", c.record,
		"--run-id", "job-88", "--policy", c.malloryPol)
	c.refused(t, c.other, "job-88", "run job-88 was admitted by digest", false)
	c.refused(t, c.other, "job-88", "pass --policy", true)
	c.refused(t, c.other, "job-88", "not approved", false, "--policy", c.policy)
	refused(t, c.env, 1, []string{"run job-88", "pass --policy"}, "admit", c.other, "--purpose", permitPurpose, "--store", c.store,
		"--run-record", c.record, "--run-id", "job-88")
	// A run admitted by digest under the caller's policy mounts under it.
	mustPinfs(t, c.env, "admit", c.digest, "--purpose", permitPurpose, "--store", c.store, "--run-record", c.record,
		"--run-id", "job-d", "--policy", c.policy)
	c.serves(t, "job-d", "--policy", c.policy)

	got := strings.TrimSpace(mustPinfs(t, c.env, c.admit("job-ok")...).stdout)
	if got != "job-ok "+c.digest {
		t.Fatalf("admit printed %q, want %q", got, "job-ok "+c.digest)
	}
	c.serves(t, "job-ok")
	c.serves(t, "job-ok") // resume: the same run id and digest
	if got := strings.TrimSpace(mustPinfs(t, c.env, c.admit("job-ok")...).stdout); got != "job-ok "+c.digest {
		t.Errorf("admit of the admitted run again printed %q, want its permit", got)
	}
	keys := c.runKeys(t, "job-ok")
	for _, w := range c.wantAfterTwo {
		if !slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, w) }) {
			t.Errorf("run job-ok's record lacks %s: %v", w, keys)
		}
	}
	// The admitted run stays bound to its digest.
	wantExit(t, c.env, 1, []string{"run job-ok was started on " + c.digest}, "mount", c.other, t.TempDir(), "--store", c.store,
		"--cache-dir", c.cache, "--run-record", c.record, "--run-id", "job-ok", "--foreground")
}

// TestRequirePermitLocal: a local store and a local run record.
func TestRequirePermitLocal(t *testing.T) {
	t.Parallel()
	fusetest.Require(t)
	a := localAdmStore(t)
	c := newPermitCase(t, a, a.records[0])
	c.runKeys = func(t testing.TB, runID string) []string {
		if _, err := os.Stat(c.record); os.IsNotExist(err) {
			return nil
		}
		var kinds []string
		for _, e := range events(t, c.record, "") {
			if e["run_id"] == runID {
				kinds = append(kinds, e["event"].(string))
			}
		}
		return kinds
	}
	c.plant = func(t testing.TB, runID, d, permit string) { plantLocal(t, c.record, runID, d, permit) }
	c.wantAfterTwo = []string{"permit", "run_start", "resume", "run_end"}
	checkRequirePermit(t, c)
}

// TestRequirePermitS3: an S3 store and a run record in S3, where the
// permit is in the run's binding (runs/<id>/run.json).
func TestRequirePermitS3(t *testing.T) {
	t.Parallel()
	fusetest.Require(t)
	a := s3AdmStore(t)
	c := newPermitCase(t, a, "s3://store/records")
	c.runKeys = func(t testing.TB, runID string) []string {
		out, err := a.s3.Client(t).ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{
			Bucket: aws.String("store"), Prefix: aws.String("records/runs/" + runID + "/")})
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, o := range out.Contents {
			ks = append(ks, aws.ToString(o.Key))
		}
		return ks
	}
	c.plant = func(t testing.TB, runID, d, permit string) {
		a.s3.Put(t, "store", "records/runs/"+runID+"/run.json", fmt.Appendf(nil, `{"run_id":%q,"digest":%q,"time":%q,"permit":%s}`+"\n",
			runID, d, time.Now().UTC().Format(time.RFC3339Nano), permit))
	}
	c.wantAfterTwo = []string{"/run.json", "/start.json", "-run_start-", "-resume-", "-run_end-"}
	checkRequirePermit(t, c)

	// Issue 24 item 5: job-ok was admitted into the S3 record; a mount
	// without --run-record searches <cache-dir>/runs.jsonl, and says so.
	dir := t.TempDir()
	t.Cleanup(func() { fusetest.ForceUnmount(t, dir) })
	wantExit(t, c.env, 1, []string{"run job-ok holds no permit in run record " + filepath.Join(c.cache, "runs.jsonl")},
		"mount", c.digest, dir, "--store", c.store, "--cache-dir", c.cache, "--run-id", "job-ok", "--require-permit", "--foreground")
	if fusetest.Mounted(dir) {
		t.Fatal("mounted a run that holds no permit in the record searched")
	}

	// Admitted without --run-record, the run's permit is in that default
	// record, and a mount without --run-record finds it and serves.
	if got := strings.TrimSpace(mustPinfs(t, c.env, "admit", "prod", "--purpose", permitPurpose, "--store", c.store,
		"--cache-dir", c.cache, "--run-id", "job-dflt").stdout); got != "job-dflt "+c.digest {
		t.Fatalf("admit without --run-record printed %q", got)
	}
	m := startMount(t, c.env, dir, c.digest, dir, "--store", c.store, "--cache-dir", c.cache, "--run-id", "job-dflt", "--require-permit")
	if b, err := readFile(t, filepath.Join(dir, c.file)); err != nil || !bytes.Equal(b, c.want) {
		t.Fatalf("read %s through the mount admitted into the default record: %v", c.file, err)
	}
	m.stop(t, 10*time.Second)
	if code := m.exitCode(t, time.Second); code != 0 {
		t.Fatalf("the mount admitted into the default record exited %d", code)
	}
}
