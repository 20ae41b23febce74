package runrecord

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pinfs/pinfs/verify"
)

// RunInfo is one line of `pinfs run list`.
type RunInfo struct {
	RunID     string           `json:"run_id"`
	Digest    verify.Digest    `json:"digest"`
	First     time.Time        `json:"first"`
	Last      time.Time        `json:"last"`
	State     string           `json:"state"`
	Mounts    int              `json:"mounts"`
	Integrity map[string]int64 `json:"integrity"` // mismatch, version_missing, fetch_failed: always all three keys
}

// List summarises every run in the record, sorted by First then RunID,
// with the spooled events of src.SpoolDir merged in (also of runs the
// record lacks). It stays fast with hundreds of runs of large consumed
// sets: from a local file it decodes each line only up to its payload
// (the `members` or `set` field, which it skips unread); from a store it
// lists runs/ once, takes each event's time and kind from its key, and
// GETs only run.json and the run_start, resume and run_end objects (16 at
// a time), and, for a run whose state hangs on how recently a mount on
// another host wrote, the newest events of the last few flush intervals
// until one of that mount turns up.
func List(ctx context.Context, src Source, now time.Time, alive Liveness) ([]RunInfo, error) {
	remote, err := src.target()
	if err != nil {
		return nil, err
	}
	var infos []RunInfo
	if remote {
		infos, err = listStore(ctx, src, now, alive)
	} else {
		infos, err = listFile(ctx, src, now, alive)
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(infos, func(a, b RunInfo) int {
		return cmp.Or(a.First.Compare(b.First), strings.Compare(a.RunID, b.RunID))
	})
	return infos, nil
}

// tally is the span and the integrity counts of one run's events.
type tally struct {
	first, last time.Time
	integrity   map[string]int64
}

func (t *tally) add(at time.Time, kind string) {
	if t.first.IsZero() || at.Before(t.first) {
		t.first = at
	}
	if at.After(t.last) {
		t.last = at
	}
	if _, ok := t.counts()[kind]; ok {
		t.integrity[kind]++
	}
}

// counts returns the integrity counts, every kind present.
func (t *tally) counts() map[string]int64 {
	if t.integrity == nil {
		t.integrity = map[string]int64{Mismatch: 0, VersionMissing: 0, FetchFailed: 0}
	}
	return t.integrity
}

// info is the RunInfo of run r, whose mounts are ms, and whose events
// span and count t.
func (t *tally) info(r *Run, ms []Mount) RunInfo {
	return RunInfo{
		RunID: r.RunID, Digest: r.Digest, First: t.first, Last: t.last,
		State: StateOf(ms, r.Permit != nil), Mounts: len(ms), Integrity: t.counts(),
	}
}

// headKey names an event by its fields other than the payload: two lines
// with the same head are one event written twice (a process numbers its
// events).
func headKey(e *Event) string {
	return fmt.Sprintf("%s-%d-%s-%s-%d", e.Time.UTC().Format(keyTime), e.Seq, e.Event, e.Host, e.PID)
}

// parseHead decodes the event line (whole, in memory) up to its payload.
func parseHead(line []byte) (Event, bool) {
	line = bytes.TrimSpace(line)
	if i := firstMark(line, 0); i >= 0 {
		if !bytes.HasSuffix(line, []byte("}")) {
			return Event{}, false
		}
		line = append(line[:i:i], '}')
	}
	return parseLine(line)
}

// listFile is List of a local record file.
func listFile(ctx context.Context, src Source, now time.Time, alive Liveness) ([]RunInfo, error) {
	runs := map[string]*collector{}
	add := func(e Event) {
		c := runs[e.RunID]
		if c == nil {
			c = &collector{}
			runs[e.RunID] = c
		}
		c.add(headKey(&e), e)
	}
	err := scanFile(ctx, src.URL, true, func(line []byte, ok bool) error {
		if e, parsed := parseLine(line); ok && parsed {
			add(e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = eachSpool(src, func(_ string, lines [][]byte) {
		for _, line := range lines {
			if e, ok := parseHead(line); ok {
				add(e)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	infos := make([]RunInfo, 0, len(runs))
	for id, c := range runs {
		r := c.finish(id)
		var t tally
		for _, e := range r.Events {
			t.add(e.Time, e.Event)
		}
		infos = append(infos, t.info(r, r.Mounts(now, alive)))
	}
	return infos, nil
}

// eachSpool calls fn with the lines of every spool in src.SpoolDir whose
// local binding names src.URL.
func eachSpool(src Source, fn func(runID string, lines [][]byte)) error {
	if src.SpoolDir == "" {
		return nil
	}
	des, err := os.ReadDir(src.SpoolDir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("runrecord: spool: %w", err)
	}
	for _, de := range des {
		id, ok := strings.CutSuffix(de.Name(), ".run.json")
		if !ok || checkRunID(id) != nil {
			continue
		}
		lines, err := spoolLines(src, id)
		if err != nil {
			return err
		}
		if len(lines) > 0 {
			fn(id, lines)
		}
	}
	return nil
}
