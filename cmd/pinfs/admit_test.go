package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/verify"
)

// approvedSnapshot pins files for purpose training into a new local store,
// approves it with a new key, and returns the store, the digest and a
// policy file that trusts that key.
func approvedSnapshot(t *testing.T) (st, d, policy string) {
	t.Helper()
	st, keys := t.TempDir(), t.TempDir()
	if code, _, errs := runPinfs(t, "key", "generate", filepath.Join(keys, "alice")); code != exitOK {
		t.Fatalf("key generate: exit %d: %s", code, errs)
	}
	policy = filepath.Join(keys, "policy.json")
	if err := os.WriteFile(policy, []byte(`{"approvers": ["alice.pub"], "threshold": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	d = pinFiles(t, st, map[string]string{"train/a": "alpha", "train/b": "beta"}, "--purpose", "training")
	for _, args := range [][]string{{"validate", d, "--store", st}, {"approve", d, "--store", st, "--key", filepath.Join(keys, "alice.key")}} {
		if code, _, errs := runPinfs(t, args...); code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
	}
	return st, d, policy
}

// TestAdmitDefaultsToTheMountsRunRecord: pinfs admit without --run-record
// writes the permit into <cache-dir>/runs.jsonl, the record pinfs mount
// reads by default (issue 24 item 5), and a mount --require-permit that
// finds no permit names the record it searched.
func TestAdmitDefaultsToTheMountsRunRecord(t *testing.T) {
	st, d, policy := approvedSnapshot(t)
	cache := filepath.Join(t.TempDir(), "cache")
	code, out, errs := runPinfs(t, "admit", d, "--purpose", "training", "--store", st, "--cache-dir", cache, "--run-id", "job-1", "--policy", policy)
	if code != exitOK || out != "job-1 "+d+"\n" {
		t.Fatalf("admit without --run-record: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	record := runrecord.DefaultURL(cache)
	if record != filepath.Join(cache, "runs.jsonl") {
		t.Fatalf("the default run record is %s", record)
	}
	held, err := runrecord.Held(t.Context(), runrecord.Options{URL: record, RunID: "job-1"})
	if err != nil || held == nil || held.Digest != verify.Digest(d) || held.Purpose != "training" {
		t.Fatalf("permit of job-1 in %s: %+v, %v", record, held, err)
	}

	// mount --require-permit with the same cache dir and no --run-record
	// refuses a run admitted nowhere, naming the record it searched, before
	// anything is mounted (the permit check comes first). That it serves a
	// run admitted there is integration's TestRequirePermitS3, which mounts.
	mnt := t.TempDir()
	mount := func(runID string) (int, string, string) {
		return runPinfs(t, "mount", d, mnt, "--store", st, "--cache-dir", cache, "--run-id", runID, "--require-permit", "--policy", policy, "--foreground")
	}
	code, out, errs = mount("job-2")
	want := fmt.Sprintf("run job-2 holds no permit in run record %s", record)
	if code != exitFailed || !strings.Contains(errs, want) || strings.Count(errs, "\n") != 1 {
		t.Fatalf("mount of a run admitted nowhere: exit %d, stdout %q, stderr %q; want one line saying %q", code, out, errs, want)
	}

	// Without a cache dir, admit needs --run-record (a usage error).
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	code, _, errs = runPinfs(t, "admit", d, "--purpose", "training", "--store", st, "--policy", policy)
	if code != exitUsage || !strings.Contains(errs, "--run-record is required") {
		t.Fatalf("admit without a cache dir or --run-record: exit %d, stderr %q", code, errs)
	}
}
