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

// permitCase is one store and run record for the --require-permit tests.
type permitCase struct {
	env          []string
	store        string
	record       string // a local file or s3://…
	cache        string
	digest       string                                    // the snapshot mounted
	other        string                                    // another snapshot of the store
	file         string                                    // a member of digest
	want         []byte                                    // its bytes
	runKeys      func(t testing.TB, runID string) []string // what the record holds of the run
	admit        func(t testing.TB, runID, d string)       // writes a permit for d as the run's binding
	wantAfterTwo []string                                  // run record entries after two mounts
}

// permitJSON is a permit for run runID and digest d as runrecord.Admit
// writes it (the package is internal to cmd/, so this test writes the
// record's format itself, which also pins that format).
func permitJSON(runID, d string, at time.Time) string {
	return fmt.Sprintf(`{"run_id":%q,"digest":%q,"purpose":"integration","tombstone_watermark":0,"benchmark_fence":0,"time":%q}`,
		runID, d, at.UTC().Format(time.RFC3339Nano))
}

// admitLocal appends a permit event for run runID and digest d, as the
// run's first line, to the local record file.
func admitLocal(t testing.TB, record, runID, d string) {
	t.Helper()
	now := time.Now()
	line := fmt.Sprintf(`{"time":%q,"run_id":%q,"digest":%q,"event":"permit","seq":1,"permit":%s}`+"\n",
		now.UTC().Format(time.RFC3339Nano), runID, d, permitJSON(runID, d, now))
	f, err := os.OpenFile(record, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line); err != nil {
		t.Fatal(err)
	}
}

// mountArgs is the command line of a pinfs mount of c.digest at dir for
// run runID.
func (c *permitCase) mountArgs(dir, runID string, extra ...string) []string {
	return append([]string{"mount", c.digest, dir, "--store", c.store, "--cache-dir", c.cache,
		"--run-record", c.record, "--run-id", runID}, extra...)
}

// refused checks that mounting run runID with --require-permit exits 1
// with want, mounts nothing and writes nothing of the run.
func (c *permitCase) refused(t *testing.T, runID string, want string, background bool) {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() { fusetest.ForceUnmount(t, dir) }) // should the mount wrongly serve
	before := c.runKeys(t, runID)
	args := c.mountArgs(dir, runID, "--require-permit")
	if !background {
		args = append(args, "--foreground")
	}
	r := wantExit(t, c.env, 1, []string{want}, args...)
	if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n > 0 {
		t.Errorf("the refusal is not one line: %q", r.stderr)
	}
	if fusetest.Mounted(dir) {
		t.Fatalf("mounted although run %s holds no permit for %s: %v", runID, c.digest, r)
	}
	if after := c.runKeys(t, runID); !slices.Equal(after, before) {
		t.Fatalf("a refused mount wrote to run %s's record: %v, before %v", runID, after, before)
	}
}

// serves mounts run runID with --require-permit, reads c.file and stops.
func (c *permitCase) serves(t *testing.T, runID string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d := startMount(t, c.env, dir, c.mountArgs(dir, runID, "--require-permit")[1:]...)
	if b, err := readFile(t, filepath.Join(dir, c.file)); err != nil || !bytes.Equal(b, c.want) {
		t.Fatalf("read %s through the permitted mount: %v", c.file, err)
	}
	d.stop(t, 10*time.Second)
	if code := d.exitCode(t, time.Second); code != 0 {
		t.Fatalf("permitted mount exited %d", code)
	}
}

// checkRequirePermit runs the --require-permit cases on c.
func checkRequirePermit(t *testing.T, c *permitCase) {
	wantExit(t, c.env, 2, []string{"--require-permit needs --run-id"},
		"mount", c.digest, t.TempDir(), "--store", c.store, "--cache-dir", c.cache, "--run-record", c.record, "--require-permit")

	c.refused(t, "job-none", "run job-none holds no permit", false)
	c.refused(t, "job-none", "run job-none holds no permit", true) // the daemon gets the flag too

	c.admit(t, "job-other", c.other)
	c.refused(t, "job-other", "run job-other's permit is for "+c.other+" not "+c.digest, false)

	c.admit(t, "job-ok", c.digest)
	c.serves(t, "job-ok")
	c.serves(t, "job-ok") // resume: the same run id and digest
	got := c.runKeys(t, "job-ok")
	for _, w := range c.wantAfterTwo {
		if !slices.ContainsFunc(got, func(k string) bool { return strings.Contains(k, w) }) {
			t.Errorf("run job-ok's record lacks %s: %v", w, got)
		}
	}
	// The admitted run stays bound to its digest.
	wantExit(t, c.env, 1, []string{"run job-ok was started on " + c.digest}, "mount", c.other, t.TempDir(), "--store", c.store,
		"--cache-dir", c.cache, "--run-record", c.record, "--run-id", "job-ok", "--foreground")
}

// TestRequirePermitLocal: a local store and a local run record.
func TestRequirePermitLocal(t *testing.T) {
	fusetest.Require(t)
	work := t.TempDir()
	src, st := filepath.Join(work, "src"), filepath.Join(work, "store")
	os.MkdirAll(src, 0o755)
	want := randomBytes(t, 100_000)
	if err := os.WriteFile(filepath.Join(src, "a.bin"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	d := mustPinfs(t, nil, "pin", src, "--store", st).lastLine()
	if err := os.WriteFile(filepath.Join(src, "b.txt"), []byte("another snapshot\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := mustPinfs(t, nil, "pin", src, "--store", st).lastLine()
	record := filepath.Join(work, "runs.jsonl")
	checkRequirePermit(t, &permitCase{
		store: st, record: record, cache: filepath.Join(work, "cache"), digest: d, other: other, file: "a.bin", want: want,
		runKeys: func(t testing.TB, runID string) []string {
			if _, err := os.Stat(record); os.IsNotExist(err) {
				return nil
			}
			var kinds []string
			for _, e := range events(t, record, "") {
				if e["run_id"] == runID {
					kinds = append(kinds, e["event"].(string))
				}
			}
			return kinds
		},
		wantAfterTwo: []string{"permit", "run_start", "resume", "run_end"},
		admit:        func(t testing.TB, runID, d string) { admitLocal(t, record, runID, d) },
	})
}

// TestRequirePermitS3: an S3 store and a run record in S3.
func TestRequirePermitS3(t *testing.T) {
	f := pinFixture(t)
	other := mustPinfs(t, f.env, "pin", "s3://data/ds/", "--store", f.store).lastLine()
	if other == f.digest {
		t.Fatal("test setup: the re-pin after an overwrite has the same digest")
	}
	checkRequirePermit(t, &permitCase{
		env: f.env, store: f.store, record: "s3://store/records", cache: filepath.Join(f.work, "cache"),
		digest: f.digest, other: other, file: "README", want: f.data["README"],
		runKeys: func(t testing.TB, runID string) []string {
			out, err := f.s.Client(t).ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{
				Bucket: aws.String("store"), Prefix: aws.String("records/runs/" + runID + "/")})
			if err != nil {
				t.Fatal(err)
			}
			var ks []string
			for _, o := range out.Contents {
				ks = append(ks, aws.ToString(o.Key))
			}
			return ks
		},
		wantAfterTwo: []string{"/run.json", "/start.json", "-run_start-", "-resume-", "-run_end-"},
		admit: func(t testing.TB, runID, d string) {
			now := time.Now()
			f.s.Put(t, "store", "records/runs/"+runID+"/run.json", fmt.Appendf(nil, `{"run_id":%q,"digest":%q,"time":%q,"permit":%s}`+"\n",
				runID, d, now.UTC().Format(time.RFC3339Nano), permitJSON(runID, d, now)))
		},
	})
}
