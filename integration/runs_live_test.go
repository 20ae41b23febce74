package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// liveReport is the part of `pinfs run show --json` that says how current
// the report of a running run is.
type liveReport struct {
	Totals struct {
		MembersOpened  int64 `json:"members_opened"`
		BytesServed    int64 `json:"bytes_served"`
		BlocksVerified int64 `json:"blocks_verified"`
		NetworkFetches int64 `json:"network_fetches"`
	} `json:"totals"`
	Mounts []struct {
		State         string    `json:"state"`
		LastFlush     time.Time `json:"last_flush"`
		FlushInterval string    `json:"flush_interval"`
		Pinfs         *struct {
			Version string `json:"version"`
		} `json:"pinfs"`
		Live *struct {
			Mountpoint string    `json:"mountpoint"`
			Time       time.Time `json:"time"`
			Error      string    `json:"error"`
			Totals     struct {
				BytesServed int64 `json:"bytes_served"`
			} `json:"totals"`
		} `json:"live"`
	} `json:"mounts"`
}

// TestRunShowOfALiveRun is issue 24 item 4: before a running mount has
// flushed anything, run show reports what it has read so far, asked from
// the mount itself (counters and consumed set), and says of a mount it
// did not ask (--live-timeout 0) as of when the record has it.
func TestRunShowOfALiveRun(t *testing.T) {
	t.Parallel()
	c := newRunsCase(t, func(f *fixture) string { return filepath.Join(f.work, "runs.jsonl") })
	const runID, partial = "live-1", 100 << 10
	big := "train/big.bin"
	dir, d := c.f.mount(t, c.cache, c.record, "--run-id", runID, "--flush-interval", "1h")
	c.readWhole(t, dir, "README", "val/v.txt")
	c.readPart(t, dir, big, 0, partial)
	if evs := events(t, c.record, "consumed"); len(evs) != 0 {
		t.Fatalf("the mount flushed already (%d consumed events): the test needs a run the record has nothing of", len(evs))
	}
	want := consumedWant{
		"README": {int64(len(c.f.data["README"])), true}, "val/v.txt": {int64(len(c.f.data["val/v.txt"])), true},
		big: {partial, false},
	}
	c.checkConsumed(t, "live, before any flush", c.show(t, runID), want)

	var status struct {
		MembersOpened int64 `json:"members_opened"`
		BytesServed   int64 `json:"bytes_served"`
	}
	if err := json.Unmarshal([]byte(mustPinfs(t, c.f.env, "status", dir, "--json").stdout), &status); err != nil {
		t.Fatal(err)
	}
	live := c.liveShow(t, runID)
	real, _ := filepath.EvalSymlinks(dir)
	if len(live.Mounts) != 1 || live.Mounts[0].Live == nil {
		t.Fatalf("run show of the live run: mounts %+v, want one answering live", live.Mounts)
	}
	m := live.Mounts[0]
	if m.Live.Mountpoint != real || m.Live.Error != "" || time.Since(m.Live.Time) > time.Minute || m.FlushInterval != "1h0m0s" || !m.LastFlush.IsZero() {
		t.Errorf("live mount %+v (live %+v), want %s answering now, flushing every 1h0m0s, never flushed", m, *m.Live, real)
	}
	if m.Pinfs == nil || m.Pinfs.Version == "" {
		t.Errorf("the mount names no pinfs build: %+v", m.Pinfs)
	}
	if tot := live.Totals; tot.MembersOpened != 3 || tot.BytesServed != status.BytesServed || tot.BytesServed < partial || m.Live.Totals.BytesServed != tot.BytesServed {
		t.Errorf("totals %+v, want 3 members opened and pinfs status's %d bytes served", tot, status.BytesServed)
	}
	out := c.pinfsRun(t, 0, "show", runID).stdout
	if !lineWith(out, "live at "+real, "3 members opened", "as of its start at", "before any flush", "every 1h)") ||
		!lineWith(out, "consumed  3 members opened, 2 read in full") {
		t.Errorf("run show of the live run:\n%s", out)
	}

	// Not asked: the record's zeros, saying so.
	out = c.pinfsRun(t, 0, "show", runID, "--live-timeout", "0").stdout
	if !lineWith(out, "as of its start at", "before any flush", "(every 1h)") || !lineWith(out, "consumed  0 members opened") ||
		!lineWith(out, "without the counters of 1 running mount(s) not asked live") || strings.Contains(out, "live at") {
		t.Errorf("run show --live-timeout 0 of the live run:\n%s", out)
	}

	// What a live mount answers is a report, not evidence: replay and
	// export use the record's consumed set only, which is empty so far.
	if out := c.pinfsRun(t, 0, "replay", runID, "--quiet").stdout; !strings.Contains(out, "run "+runID+": 0 members, 0 bytes") {
		t.Errorf("run replay of the live run, before any flush:\n%s", out)
	}
	if out := c.pinfsRun(t, 0, "export", runID, "--format", "prov").stdout; strings.Contains(out, "val/v.txt") || strings.Contains(out, "README") {
		t.Errorf("run export of the live run, before any flush, names members the record does not have:\n%s", out)
	}

	d.stop(t, 30*time.Second)
	if code := d.exitCode(t, time.Second); code != 0 {
		t.Fatalf("the mount exited %d", code)
	}
	rep := c.show(t, runID)
	if rep.State != "ended" {
		t.Errorf("after the unmount: state %s, want ended", rep.State)
	}
	c.checkConsumed(t, "after the unmount", rep, want)
}

// liveShow returns `pinfs run show runID --json`, the part liveReport reads.
func (c *runsCase) liveShow(t testing.TB, runID string) liveReport {
	t.Helper()
	var rep liveReport
	out := c.pinfsRun(t, 0, "show", runID, "--json").stdout
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("pinfs run show --json: %v\n%s", err, out)
	}
	return rep
}
