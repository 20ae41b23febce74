package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pinfs/pinfs/verify/b3"
)

// TestRunShowReadsOldRecords writes a run the way pinfs wrote it before
// the compact consumed set (host and pid on run_start only, cumulative
// `members` lists) and checks that run show and run list read it.
func TestRunShowReadsOldRecords(t *testing.T) {
	t.Parallel()
	c := newRunsCase(t, func(f *fixture) string { return filepath.Join(f.work, "old.jsonl") })
	const runID = "old-run"
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	member := func(p string, n int64, full bool) map[string]any {
		return map[string]any{"path": p, "id": c.ids[p], "digest": b3.Of(c.f.data[p]).String(), "size": len(c.f.data[p]), "bytes": n, "full": full}
	}
	big := int64(2 * 4096) // old records count bytes in whole 4 KiB granules
	var b []byte
	for i, e := range []map[string]any{
		{"event": "run_start", "host": "trainer-7", "pid": 4242},
		{"event": "consumed", "members": []any{member("README", 7, true)}},
		{"event": "consumed", "members": []any{member("README", 7, true), member("train/big.bin", big, false)}},
		{"event": "run_end", "totals": map[string]any{"members_opened": 2, "bytes_served": 7 + big}},
	} {
		e["time"], e["run_id"], e["digest"], e["seq"] = t0.Add(time.Duration(i)*time.Minute), runID, c.f.digest, i+1
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, line...), '\n')
	}
	if err := os.WriteFile(c.record, b, 0o644); err != nil {
		t.Fatal(err)
	}

	var rep showReport
	out := c.pinfsRun(t, 0, "show", runID, "--store", c.f.store, "--members", "--json").stdout
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("run show --json: %v\n%s", err, out)
	}
	if rep.RunID != runID || rep.Digest != c.f.digest || rep.State != "ended" || len(rep.Mounts) != 1 {
		t.Fatalf("old run: %+v; want %s %s ended with one mount", rep, runID, c.f.digest)
	}
	if m := rep.Mounts[0]; m.Host != "trainer-7" || m.PID != 4242 || !m.Start.Equal(t0) || m.Resumed || m.End == nil || !m.End.Equal(t0.Add(3*time.Minute)) {
		t.Errorf("old run's mount: %+v", m)
	}
	c.checkConsumed(t, "old record", rep, consumedWant{"README": {7, true}, "train/big.bin": {big, false}})

	out = c.pinfsRun(t, 0, "list", "--json").stdout
	var infos []struct {
		RunID  string `json:"run_id"`
		State  string `json:"state"`
		Mounts int    `json:"mounts"`
	}
	if err := json.Unmarshal([]byte(out), &infos); err != nil || len(infos) != 1 || infos[0].RunID != runID || infos[0].State != "ended" || infos[0].Mounts != 1 {
		t.Errorf("run list of the old record (%v):\n%s", err, out)
	}
}
