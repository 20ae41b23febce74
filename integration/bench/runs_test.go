package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/verify"
)

// Targets of issue 9's "Scale" section. The issue sets the record budget
// (about 2 MB for a run that read every member of a 1M-member snapshot)
// and run show's (2 s). For run list it says "stays fast with hundreds of
// runs"; the bench holds it to 1 s for 301 runs: list is the first command
// one types, it loads no member table and decodes no consumed set, so it
// has less to do than run show on one run, and half of show's target
// leaves it room for a record many times this size.
const (
	runRecordBudgetMB = 2
	runShowTarget     = 2 * time.Second
	runListTarget     = 1 * time.Second
)

// fullRunID names the run that read every member; smallRuns runs of about
// smallRunMembers members each share the record that run list reads.
const (
	fullRunID       = "bench-1m-all"
	smallRuns       = 300
	smallRunMembers = 10_000
)

// runsScale is the runs scenario (issue 9, "Scale"): `pinfs run show` and
// `pinfs run list` on a run that read every member of a 1M-member
// snapshot. Nothing is mounted: cmd/internal/runbench writes the run
// records with runrecord and consumed.Tracker, as a mount does (this
// package cannot import cmd/internal).
func (b *bench) runsScale(t *testing.T) {
	dir := t.TempDir()
	store, ls := localStore(t)
	gen := filepath.Join(dir, "runbench")
	if r := run(5*time.Minute, nil, "go", "build", "-o", gen, "../../cmd/internal/runbench"); r.err != nil {
		t.Fatalf("go build runbench: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	t0 := time.Now()
	d, total, _ := writeSyntheticSnapshot(t, ls, millionMembers)
	b.note("runs: wrote the 1M-member table in %.1f s", time.Since(t0).Seconds())

	full := filepath.Join(dir, "full.jsonl")
	st := runbench(t, gen, "full", "--record", full, "--store", store, "--digest", string(d), "--run-id", fullRunID, "--deltas", "60")
	if st.Members != millionMembers || st.Bytes != total {
		t.Fatalf("runbench full: %d members, %d bytes read; want %d, %d", st.Members, st.Bytes, millionMembers, total)
	}
	size := fileSize(t, full)
	b.limit(fmt.Sprintf("runs: run record of a run that read all 1M members (%d consumed deltas, shuffled order)", st.Events),
		float64(size)/1e6, runRecordBudgetMB, "MB", "—")
	b.note("runs: the 1M-member run's record is %d bytes: %d consumed events whose sets hold %d bytes (largest %d), written in %.1f s (1M members tracked in 128 KiB reads, Delta, Encode, Emit)",
		size, st.Events, st.SetBytes, st.MaxSet, st.Seconds)

	b.runShow(t, full, store, d, millionMembers, total)
	b.runList(t, gen, dir, full, store, d)
}

// runbenchStats is what cmd/internal/runbench prints.
type runbenchStats struct {
	Runs      int              `json:"runs"`
	Events    int              `json:"consumed_events"`
	SetBytes  int64            `json:"set_bytes"`
	MaxSet    int              `json:"max_set"`
	Members   int64            `json:"members_opened"`
	Bytes     int64            `json:"bytes_read"`
	Integrity map[string]int64 `json:"integrity"`
	Seconds   float64          `json:"seconds"`
}

// runbench runs the record generator gen and returns what it wrote.
func runbench(t *testing.T, gen string, args ...string) runbenchStats {
	t.Helper()
	r := run(10*time.Minute, nil, gen, args...)
	if r.err != nil {
		t.Fatalf("runbench %s: %v\n%s", strings.Join(args, " "), r.err, r.stderr)
	}
	var st runbenchStats
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("runbench %s printed %q: %v", args[0], r.stdout, err)
	}
	return st
}

// runShow times `pinfs run show` of the 1M-member run, cold and warm,
// against `pinfs verify --no-head`, which loads the same member table.
func (b *bench) runShow(t *testing.T, record, store string, d verify.Digest, n, total int64) {
	vr, vrss := b.timed("pinfs verify --no-head, 1M members (baseline of run show)", b.bin, "verify", string(d), "--store", store, "--no-head")
	if vr.err != nil {
		t.Errorf("pinfs verify --no-head: %v\n%s%s", vr.err, vr.stdout, vr.stderr)
	}
	b.note("runs: baseline `pinfs verify %s --store STORE --no-head`: %.2f s wall, %.2f s CPU, peak RSS %s", d, vr.wall.Seconds(), vr.cpu, mb(vrss))
	cache := t.TempDir()
	var cold time.Duration
	for _, pass := range []string{"cold metadata cache", "warm metadata cache"} {
		name := "runs: `pinfs run show --json` of the run that read all 1M members, " + pass
		r, rss := b.timed("pinfs run show, 1M-member run, "+pass, b.bin, "run", "show", fullRunID,
			"--run-record", record, "--store", store, "--cache-dir", cache, "--json")
		if r.err != nil {
			t.Errorf("pinfs run show (%s): %v\n%s", pass, r.err, r.stderr)
			b.info(name, "failed: "+firstLine(r.stderr), "—", "—", fmt.Sprintf("≤ %g s", runShowTarget.Seconds()), "—")
			continue
		}
		b.limit(name, r.wall.Seconds(), runShowTarget.Seconds(), "s", "—")
		if err := checkShow(r.stdout, n, total); err != nil {
			b.rows[len(b.rows)-1].verdict = "no (output)"
			t.Errorf("pinfs run show (%s): %v", pass, err)
		}
		b.note("runs: `pinfs run show %s --run-record F --store STORE --cache-dir C --json` (%s): %.2f s wall, %.2f s CPU, peak RSS %s, %d bytes of JSON",
			fullRunID, pass, r.wall.Seconds(), r.cpu, mb(rss), len(r.stdout))
		if cold == 0 {
			cold = r.wall
		}
	}
	if cold > 0 && vr.err == nil {
		b.info("runs: `run show` (cold) / `pinfs verify --no-head` (both load the 1M-member table)",
			secs(cold), "verify "+secs(vr.wall), fmt.Sprintf("%.2f", cold.Seconds()/vr.wall.Seconds()), "report only", "—")
	}
}

// runList writes smallRuns runs to a record, times `pinfs run list` on it,
// appends the 1M-member run and times it again.
func (b *bench) runList(t *testing.T, gen, dir, full, store string, d verify.Digest) {
	many := filepath.Join(dir, "many.jsonl")
	st := runbench(t, gen, "small", "--record", many, "--store", store, "--digest", string(d),
		"--run-id", "bench-small", "--runs", strconv.Itoa(smallRuns), "--members", strconv.Itoa(smallRunMembers), "--jobs", "8")
	b.note("runs: %d small runs (about %d members each, a quarter read in part, 4 consumed deltas, a mismatch in every tenth, a fetch_failed in every fiftieth) written in %.1f s: %d bytes of record, %d consumed events with %d bytes of sets",
		st.Runs, smallRunMembers, st.Seconds, fileSize(t, many), st.Events, st.SetBytes)
	cache := t.TempDir() // an empty spool: nothing merged from this host's default cache dir
	small, ok := b.list(t, many, cache, smallRuns, st.Integrity)
	if !ok {
		return
	}
	if err := appendFile(many, full); err != nil {
		t.Fatal(err)
	}
	size := fileSize(t, many)
	all, ok := b.list(t, many, cache, smallRuns+1, st.Integrity) // the 1M run has no integrity events
	if !ok {
		return
	}
	b.limit(fmt.Sprintf("runs: `pinfs run list --json` (median of 3), %d runs in one %.1f MB record (one read all 1M members)", smallRuns+1, float64(size)/1e6),
		all.Seconds(), runListTarget.Seconds(), "s", "—")
	b.info("runs: `run list` with the 1M run / without it (its consumed sets are skipped, not decoded)",
		secs(all), "without "+secs(small), fmt.Sprintf("%.2f", all.Seconds()/small.Seconds()), "report only", "—")
}

// list times `pinfs run list --json` on record (the median of three
// runs) and checks that it lists want runs, all ended, with integrity
// events summing to integrity.
func (b *bench) list(t *testing.T, record, cache string, want int, integrity map[string]int64) (time.Duration, bool) {
	var walls []time.Duration
	var cpu float64
	var rss int64
	for range 3 {
		r, hwm := b.timed(fmt.Sprintf("pinfs run list, %d runs", want), b.bin, "run", "list", "--run-record", record, "--cache-dir", cache, "--json")
		if r.err != nil {
			t.Errorf("pinfs run list (%d runs): %v\n%s", want, r.err, r.stderr)
			return 0, false
		}
		if err := checkList(r.stdout, want, integrity); err != nil {
			t.Errorf("pinfs run list (%d runs): %v", want, err)
			return 0, false
		}
		walls, cpu, rss = append(walls, r.wall), max(cpu, r.cpu), max(rss, hwm)
	}
	sort.Slice(walls, func(i, j int) bool { return walls[i] < walls[j] })
	b.note("runs: `pinfs run list --run-record F --cache-dir C --json` of %d runs: %s, %s, %s wall (median taken), at most %.2f s CPU, peak RSS %s",
		want, secs(walls[0]), secs(walls[1]), secs(walls[2]), cpu, mb(rss))
	return walls[1], true
}

// checkShow checks run show's JSON: the run that read all n members
// (total bytes), ended, one mount.
func checkShow(out string, n, total int64) error {
	var rep struct {
		RunID    string `json:"run_id"`
		State    string `json:"state"`
		Mounts   []json.RawMessage
		Consumed struct {
			MembersOpened int64 `json:"members_opened"`
			MembersFull   int64 `json:"members_full"`
			Bytes         int64 `json:"bytes"`
		} `json:"consumed"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		return fmt.Errorf("output is not the JSON report: %v", err)
	}
	c := rep.Consumed
	if rep.RunID != fullRunID || rep.State != "ended" || len(rep.Mounts) != 1 {
		return fmt.Errorf("run %q state %q with %d mounts, want %s ended with 1", rep.RunID, rep.State, len(rep.Mounts), fullRunID)
	}
	if c.MembersOpened != n || c.MembersFull != n || c.Bytes != total {
		return fmt.Errorf("consumed %d opened, %d full, %d bytes; want %d, %d, %d", c.MembersOpened, c.MembersFull, c.Bytes, n, n, total)
	}
	return nil
}

// checkList checks run list's JSON: want runs, each ended with one mount,
// integrity events summing to integrity per kind, the 1M run among them
// when want exceeds smallRuns.
func checkList(out string, want int, integrity map[string]int64) error {
	var runs []struct {
		RunID     string           `json:"run_id"`
		State     string           `json:"state"`
		Mounts    int              `json:"mounts"`
		Integrity map[string]int64 `json:"integrity"`
	}
	if err := json.Unmarshal([]byte(out), &runs); err != nil {
		return fmt.Errorf("output is not a JSON list of runs: %v", err)
	}
	if len(runs) != want {
		return fmt.Errorf("listed %d runs, want %d", len(runs), want)
	}
	got, seen := map[string]int64{}, map[string]bool{}
	for _, r := range runs {
		if r.State != "ended" || r.Mounts != 1 {
			return fmt.Errorf("run %s: state %s with %d mounts, want ended with 1", r.RunID, r.State, r.Mounts)
		}
		for k, v := range r.Integrity {
			got[k] += v
		}
		seen[r.RunID] = true
	}
	for _, k := range []string{"mismatch", "version_missing", "fetch_failed"} {
		if got[k] != integrity[k] {
			return fmt.Errorf("%d %s events listed, want %d", got[k], k, integrity[k])
		}
	}
	if want > smallRuns && !seen[fullRunID] {
		return fmt.Errorf("run %s not listed", fullRunID)
	}
	return nil
}

// timed runs a pinfs command (bounded by 5 minutes) as a CPU measurement
// named name and returns its result and peak RSS in bytes.
func (b *bench) timed(name, bin string, args ...string) (cmdResult, int64) {
	s0 := b.sample(0)
	r, rss := runRSS(5*time.Minute, bin, args...)
	m := b.done(name, s0, 0, 0, r.cpu)
	m.wall = r.wall
	b.cpu[len(b.cpu)-1] = m
	return r, rss
}

// runRSS is run for a single process (no pipeline) that also returns its
// peak resident set size in bytes: the last VmHWM read from /proc every
// 10 ms (the rusage of wait4 is no use here: a child that Go starts with
// vfork inherits the high-water mark of this large test process).
func runRSS(timeout time.Duration, name string, args ...string) (cmdResult, int64) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return cmdResult{err: err}, 0
	}
	stop, peak := make(chan struct{}), make(chan int64)
	go func() {
		var hwm int64
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if v := procStatus(cmd.Process.Pid, "VmHWM"); v > 0 {
				hwm = v
			}
			select {
			case <-stop:
				peak <- hwm
				return
			case <-tick.C:
			}
		}
	}()
	err := cmd.Wait()
	close(stop)
	r := cmdResult{stdout: out.String(), stderr: errb.String(), wall: time.Since(start), err: err}
	if ps := cmd.ProcessState; ps != nil {
		r.cpu = ps.UserTime().Seconds() + ps.SystemTime().Seconds()
	}
	if err != nil && ctx.Err() != nil {
		r.err = fmt.Errorf("%s: timed out after %v: %w", name, timeout, err)
	}
	return r, <-peak
}

// appendFile appends the bytes of file src to file dst.
func appendFile(dst, src string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// firstLine returns s's first line.
func firstLine(s string) string {
	line, _, _ := bytes.Cut([]byte(s), []byte("\n"))
	return string(line)
}

// TestRunsScale runs the runs scenario of make bench alone and prints its
// rows and notes (bench/results.md is left as it is):
//
//	PINFS_BENCH=1 go test -run TestRunsScale -v ./integration/bench/
func TestRunsScale(t *testing.T) {
	if os.Getenv("PINFS_BENCH") != "1" {
		t.Skip("end-to-end benchmark; set PINFS_BENCH=1")
	}
	b := &bench{start: time.Now(), bin: filepath.Join(t.TempDir(), "pinfs")}
	if r := run(5*time.Minute, nil, "go", "build", "-o", b.bin, "../../cmd/pinfs"); r.err != nil {
		t.Fatalf("go build: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	cores, waited := waitQuiet(2 * time.Minute)
	b.note("%.2f cores busy outside this test when it started (waited %s for < 0.3)", cores, waited.Round(time.Second))
	t.Run("runs", b.runsScale)
	fmt.Println("\n| scenario | pinfs | baseline | ratio | target | verdict |\n|---|---|---|---|---|---|")
	for _, r := range b.rows {
		fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", r.scenario, r.pinfs, dash(r.other), r.ratio, r.target, r.verdict)
	}
	fmt.Println()
	for _, n := range b.notes {
		fmt.Println("-", n)
	}
}
