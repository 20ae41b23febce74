package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pinfs/pinfs/integration/fusetest"
	"github.com/pinfs/pinfs/verify/b3"
)

// runsCase is one run record (a local file or an S3 prefix) that a
// fixture's mounts write and pinfs run reads.
type runsCase struct {
	f      *fixture
	cache  string
	record string
	ids    map[string]string // member path -> member id, from pinfs ls
	splits map[string]string // member path -> split ("(none)" for none)
}

// newRunsCase pins a fixture and lists its members for the expected
// reports.
func newRunsCase(t *testing.T, record func(f *fixture) string) *runsCase {
	t.Helper()
	f := pinFixture(t)
	c := &runsCase{f: f, cache: filepath.Join(f.work, "cache"), record: record(f), ids: map[string]string{}, splits: map[string]string{}}
	out := mustPinfs(t, f.env, "ls", f.digest, "--store", f.store, "--json").stdout
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m struct{ Path, ID, Split string }
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("pinfs ls --json line %q: %v", line, err)
		}
		c.ids[m.Path], c.splits[m.Path] = m.ID, m.Split
		if m.Split == "" {
			c.splits[m.Path] = "(none)"
		}
	}
	if len(c.ids) != len(f.data) {
		t.Fatalf("pinfs ls lists %d members, the fixture has %d", len(c.ids), len(f.data))
	}
	return c
}

// mount mounts the fixture as run runID, flushing the consumed set every
// second.
func (c *runsCase) mount(t *testing.T, runID string) (string, *daemon) {
	t.Helper()
	return c.f.mount(t, c.cache, c.record, "--run-id", runID, "--flush-interval", "1s")
}

// pinfsRun runs `pinfs run args...` on the case's record and cache dir and
// wants exit code.
func (c *runsCase) pinfsRun(t testing.TB, code int, args ...string) result {
	t.Helper()
	args = append(append([]string{"run"}, args...), "--run-record", c.record, "--cache-dir", c.cache)
	return wantExit(t, c.f.env, code, nil, args...)
}

// show returns `pinfs run show runID --members --json`.
func (c *runsCase) show(t testing.TB, runID string) showReport {
	t.Helper()
	var rep showReport
	out := c.pinfsRun(t, 0, "show", runID, "--members", "--json").stdout
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("pinfs run show --json: %v\n%s", err, out)
	}
	if rep.RunID != runID || rep.Digest != c.f.digest {
		t.Errorf("run show: run %q digest %q, want %q %q", rep.RunID, rep.Digest, runID, c.f.digest)
	}
	return rep
}

// showReport is the part of `pinfs run show --json` the tests check.
type showReport struct {
	RunID  string `json:"run_id"`
	Digest string `json:"digest"`
	State  string `json:"state"`
	Mounts []struct {
		Host    string     `json:"host"`
		PID     int        `json:"pid"`
		Start   time.Time  `json:"start"`
		Resumed bool       `json:"resume"`
		End     *time.Time `json:"end"`
		State   string     `json:"state"`
	} `json:"mounts"`
	Consumed struct {
		counts
		Splits map[string]counts `json:"splits"`
		Digest string            `json:"digest"`
	} `json:"consumed"`
	Events []struct {
		Event string `json:"event"`
		Path  string `json:"path"`
	} `json:"events"`
	Members []struct {
		Path    string `json:"path"`
		ID      string `json:"id"`
		Digest  string `json:"digest"`
		Version string `json:"version"`
		Bytes   int64  `json:"bytes"`
		Full    bool   `json:"full"`
	} `json:"members"`
}

// counts are the consumed set's summary, of the run or of one split.
type counts struct {
	MembersOpened int64 `json:"members_opened"`
	MembersFull   int64 `json:"members_full"`
	Bytes         int64 `json:"bytes"`
}

// consumedWant is the consumed set a test expects: member path -> what
// was read of it.
type consumedWant map[string]memberWant

// memberWant is what a run read of one member: distinct bytes, and
// whether in full.
type memberWant struct {
	bytes int64
	full  bool
}

// checkConsumed compares the report's consumed set with want: the
// totals, the splits and every member listed by --members.
func (c *runsCase) checkConsumed(t testing.TB, when string, rep showReport, want consumedWant) {
	t.Helper()
	var total counts
	splits := map[string]counts{}
	for p, w := range want {
		s := splits[c.splits[p]]
		for _, k := range []*counts{&total, &s} {
			k.MembersOpened++
			k.Bytes += w.bytes
			if w.full {
				k.MembersFull++
			}
		}
		splits[c.splits[p]] = s
	}
	if rep.Consumed.counts != total {
		t.Errorf("%s: consumed %+v, want %+v", when, rep.Consumed.counts, total)
	}
	for name, s := range splits {
		if rep.Consumed.Splits[name] != s {
			t.Errorf("%s: split %s consumed %+v, want %+v (all splits %v)", when, name, rep.Consumed.Splits[name], s, rep.Consumed.Splits)
		}
	}
	if len(rep.Consumed.Splits) != len(splits) {
		t.Errorf("%s: splits %v, want %v", when, rep.Consumed.Splits, splits)
	}
	if !strings.HasPrefix(rep.Consumed.Digest, "sha256:") || len(rep.Consumed.Digest) != 71 {
		t.Errorf("%s: consumed digest %q, want sha256:<64 hex>", when, rep.Consumed.Digest)
	}
	seen := map[string]bool{}
	for _, m := range rep.Members {
		w, ok := want[m.Path]
		if !ok || seen[m.Path] {
			t.Errorf("%s: --members lists %s, which the run did not consume (or twice)", when, m.Path)
			continue
		}
		seen[m.Path] = true
		if m.ID != c.ids[m.Path] || m.Digest != b3.Of(c.f.data[m.Path]).String() || m.Version != c.f.vers[m.Path] || m.Bytes != w.bytes || m.Full != w.full {
			t.Errorf("%s: member %+v, want id %s digest %s version %s bytes %d full %t", when, m,
				c.ids[m.Path], b3.Of(c.f.data[m.Path]), c.f.vers[m.Path], w.bytes, w.full)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%s: --members lists %d members, want %d: %+v", when, len(seen), len(want), rep.Members)
	}
}

// readWhole reads the member at rel fully (buffered) and compares it with
// the pinned bytes.
func (c *runsCase) readWhole(t *testing.T, dir string, rels ...string) {
	t.Helper()
	for _, rel := range rels {
		if got, err := readFile(t, filepath.Join(dir, rel)); err != nil || !bytes.Equal(got, c.f.data[rel]) {
			t.Fatalf("%s: read %d bytes (%v), want the %d pinned ones", rel, len(got), err, len(c.f.data[rel]))
		}
	}
}

// readPart reads n bytes of rel at off with O_DIRECT, so that the mount
// sees exactly that range (no readahead), and compares them.
func (c *runsCase) readPart(t *testing.T, dir, rel string, off int64, n int) {
	t.Helper()
	want := c.f.data[rel][off:min(off+int64(n), int64(len(c.f.data[rel])))]
	aligned := (n + 4095) &^ 4095
	if got, _, err := directRead(t, filepath.Join(dir, rel), off, aligned); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s at %d: read %d bytes (%v), want the %d pinned ones", rel, off, len(got), err, len(want))
	}
}

// openOnly opens rel and closes it without reading.
func openOnly(t *testing.T, dir, rel string) {
	t.Helper()
	if _, err := inMount(t, 30*time.Second, func() (struct{}, error) {
		fh, err := os.Open(filepath.Join(dir, rel))
		if err == nil {
			fh.Close()
		}
		return struct{}{}, err
	}); err != nil {
		t.Fatal(err)
	}
}

// wantSeeded checks that the resumed mount d says it was seeded with the
// n members the run consumed before (read back from the run record).
func wantSeeded(t testing.TB, d *daemon, n int) {
	t.Helper()
	log, _ := os.ReadFile(d.log)
	if !regexp.MustCompile(`resume: seeded with .*\bmembers=` + strconv.Itoa(n) + `\b`).Match(log) {
		t.Errorf("the resumed mount was not seeded with the %d members consumed before:\n%s", n, log)
	}
}

// lineWith reports whether some line of out contains every word.
func lineWith(out string, words ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestRunsEndToEnd is issue 9's acceptance on a real mount, for a run
// record in a local file and in S3: a run, a resume and a crash, then
// run show and run list; run replay passing, then failing once pinned
// versions are deleted; run export in both formats.
func TestRunsEndToEnd(t *testing.T) {
	t.Parallel()
	for _, kind := range []struct {
		name   string
		record func(f *fixture) string
	}{
		{"file", func(f *fixture) string { return filepath.Join(f.work, "runs.jsonl") }},
		{"s3", func(*fixture) string { return "s3://store/records" }},
	} {
		t.Run(kind.name, func(t *testing.T) {
			c := newRunsCase(t, kind.record)
			runID := "run-" + kind.name
			want := c.runResumeCrash(t, runID)
			c.checkList(t, runID)
			rep := c.show(t, runID)
			c.checkExports(t, runID, rep, want)
			c.checkReplay(t, runID, want)
		})
	}
}

// runResumeCrash mounts run runID three times: a first mount, a resume
// (which must be seeded with the first mount's set) and a resume that is
// SIGKILLed. It checks run show after each and returns the consumed set.
func (c *runsCase) runResumeCrash(t *testing.T, runID string) consumedWant {
	const partial = 100 << 10 // page-aligned: 25 granules
	big, mid := "train/big.bin", "train/mid.bin"
	size := func(p string) int64 { return int64(len(c.f.data[p])) }
	host, _ := os.Hostname()
	var pids []int

	// Mount 1: two members whole, the first 100 KiB of big.bin, mid.bin
	// opened only.
	dir, d := c.mount(t, runID)
	pids = append(pids, d.cmd.Process.Pid)
	c.readWhole(t, dir, "README", "val/v.txt")
	c.readPart(t, dir, big, 0, partial)
	openOnly(t, dir, mid)
	if rep := c.show(t, runID); rep.State != "running" || len(rep.Mounts) != 1 || rep.Mounts[0].State != "running" || rep.Mounts[0].End != nil {
		t.Errorf("run show while mounted: state %s, mounts %+v; want one running mount", rep.State, rep.Mounts)
	}
	d.stop(t, 30*time.Second)
	if code := d.exitCode(t, time.Second); code != 0 {
		t.Fatalf("mount 1 exited %d", code)
	}
	want := consumedWant{
		"README": {size("README"), true}, "val/v.txt": {size("val/v.txt"), true},
		big: {partial, false}, mid: {0, false},
	}
	rep := c.show(t, runID)
	if rep.State != "ended" {
		t.Errorf("after mount 1: state %s, want ended", rep.State)
	}
	c.checkConsumed(t, "after mount 1", rep, want)

	// Mount 2 resumes, seeded with mount 1's four members: the rest of
	// big.bin (so it is read in full over the two mounts), the first 64 KiB
	// of mid.bin, empty opened.
	dir, d = c.mount(t, runID)
	pids = append(pids, d.cmd.Process.Pid)
	wantSeeded(t, d, 4)
	c.readPart(t, dir, big, partial, int(size(big))-partial)
	c.readPart(t, dir, mid, 0, 64<<10)
	openOnly(t, dir, "empty")
	d.stop(t, 30*time.Second)
	if code := d.exitCode(t, time.Second); code != 0 {
		t.Fatalf("mount 2 exited %d", code)
	}
	want[big] = memberWant{size(big), true}
	want[mid] = memberWant{64 << 10, false}
	want["empty"] = memberWant{0, true}
	c.checkConsumed(t, "after the resume", c.show(t, runID), want)
	if strings.HasPrefix(c.record, "/") {
		for _, e := range events(t, c.record, "consumed") {
			if s, _ := e["set"].(string); s == "" || e["members"] != nil {
				t.Errorf("a consumed event without a compact set, or with the old members list: %v", e)
			}
		}
	}

	// A second run in the same record, which ends.
	dir, d = c.mount(t, "other-"+runID)
	c.readWhole(t, dir, "README")
	d.stop(t, 30*time.Second)
	if code := d.exitCode(t, time.Second); code != 0 {
		t.Fatalf("the other run's mount exited %d", code)
	}

	// Mount 3 resumes again, reads one more member, and is SIGKILLed once
	// the read has been flushed: it must be in the record.
	dir, d = c.mount(t, runID)
	pids = append(pids, d.cmd.Process.Pid)
	wantSeeded(t, d, 5)
	c.readWhole(t, dir, "train/shards/s-01.txt")
	c.waitFlushed(t, runID, d.cmd.Process.Pid, time.Now())
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not die within 30 s of SIGKILL")
	}
	fusetest.ForceUnmount(t, dir)
	want["train/shards/s-01.txt"] = memberWant{size("train/shards/s-01.txt"), true}

	rep = c.show(t, runID)
	if rep.State != "crashed" {
		t.Errorf("after SIGKILL: state %s, want crashed", rep.State)
	}
	if len(rep.Mounts) != 3 {
		t.Fatalf("after SIGKILL: %d mounts, want 3: %+v", len(rep.Mounts), rep.Mounts)
	}
	for i, m := range rep.Mounts {
		ended := i < 2
		if m.Host != host || m.PID != pids[i] || m.Start.IsZero() || m.Resumed != (i > 0) || (m.End != nil) != ended {
			t.Errorf("mount %d: %+v; want host %s pid %d, a start, resume %t, an end %t", i, m, host, pids[i], i > 0, ended)
		}
		if want := map[bool]string{true: "ended", false: "crashed"}[ended]; m.State != want {
			t.Errorf("mount %d: state %s, want %s", i, m.State, want)
		}
	}
	if len(rep.Events) != 0 {
		t.Errorf("integrity events on a clean run: %+v", rep.Events)
	}
	c.checkConsumed(t, "after the crash", rep, want)

	text := c.pinfsRun(t, 0, "show", runID).stdout
	if !lineWith(text, runID, c.f.digest, "crashed") || !lineWith(text, "6 members opened", "5 read in full", strconv.FormatInt(rep.Consumed.Bytes, 10)) {
		t.Errorf("run show's text lacks the run, its digest, its state or its consumed counts:\n%s", text)
	}
	return want
}

// waitFlushed waits (bounded) until the record holds two consumed events
// of run runID from the mount with pid, both stamped after since. A delta
// is taken just before it is stamped, and the mount writes one every flush
// interval even when it is empty; so the second was taken after since, and
// the two hold everything the mount served before since.
func (c *runsCase) waitFlushed(t *testing.T, runID string, pid int, since time.Time) {
	t.Helper()
	const bound = 30 * time.Second
	for deadline := time.Now().Add(bound); ; time.Sleep(100 * time.Millisecond) {
		n := 0
		for _, e := range c.recordEvents(t, runID, "consumed") {
			at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(e["time"]))
			if err == nil && e["pid"] == float64(pid) && at.After(since) {
				n++
			}
		}
		if n >= 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the record holds %d consumed events of run %s from pid %d after %v, %v later; want 2 (flush interval 1s)",
				n, runID, pid, since.Format(time.RFC3339Nano), bound)
		}
	}
}

// recordEvents returns the events of kind of run runID that the case's
// record holds now, while mounts may be writing it: in a local file a line
// that does not parse (one being appended) is skipped; in S3 the event
// objects under <prefix>/runs/<run-id>/events/ are read.
func (c *runsCase) recordEvents(t *testing.T, runID, kind string) []map[string]any {
	t.Helper()
	var lines [][]byte
	if strings.HasPrefix(c.record, "/") {
		b, err := os.ReadFile(c.record)
		if err != nil {
			t.Fatal(err)
		}
		lines = bytes.Split(b, []byte("\n"))
	} else {
		bucket, prefix, _ := strings.Cut(strings.TrimPrefix(c.record, "s3://"), "/")
		cl := c.f.s.Client(t)
		pages := s3.NewListObjectsV2Paginator(cl, &s3.ListObjectsV2Input{
			Bucket: aws.String(bucket), Prefix: aws.String(path.Join(prefix, "runs", runID, "events") + "/"),
		})
		for pages.HasMorePages() {
			page, err := pages.NextPage(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range page.Contents {
				if !strings.Contains(*o.Key, "-"+kind+"-") {
					continue
				}
				out, err := cl.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(out.Body)
				out.Body.Close()
				if err != nil {
					t.Fatal(err)
				}
				lines = append(lines, b)
			}
		}
	}
	var evs []map[string]any
	for _, l := range lines {
		var e map[string]any
		if json.Unmarshal(l, &e) == nil && e["run_id"] == runID && e["event"] == kind {
			evs = append(evs, e)
		}
	}
	return evs
}

// checkList checks run list after runResumeCrash: runID crashed with its
// three mounts, and the other run ended.
func (c *runsCase) checkList(t *testing.T, runID string) {
	t.Helper()
	var infos []struct {
		RunID     string           `json:"run_id"`
		Digest    string           `json:"digest"`
		First     time.Time        `json:"first"`
		Last      time.Time        `json:"last"`
		State     string           `json:"state"`
		Mounts    int              `json:"mounts"`
		Integrity map[string]int64 `json:"integrity"`
	}
	out := c.pinfsRun(t, 0, "list", "--json").stdout
	if err := json.Unmarshal([]byte(out), &infos); err != nil {
		t.Fatalf("run list --json: %v\n%s", err, out)
	}
	want := []struct {
		id, state string
		mounts    int
	}{{runID, "crashed", 3}, {"other-" + runID, "ended", 1}}
	if len(infos) != len(want) {
		t.Fatalf("run list: %d runs, want %d: %s", len(infos), len(want), out)
	}
	for i, w := range want {
		r := infos[i]
		if r.RunID != w.id || r.Digest != c.f.digest || r.State != w.state || r.Mounts != w.mounts || r.First.IsZero() || r.Last.Before(r.First) {
			t.Errorf("run list %d: %+v; want %s %s %s with %d mounts", i, r, w.id, c.f.digest, w.state, w.mounts)
		}
		for _, k := range []string{"mismatch", "version_missing", "fetch_failed"} {
			if n, ok := r.Integrity[k]; !ok || n != 0 {
				t.Errorf("run list %s: integrity %v, want %s: 0", r.RunID, r.Integrity, k)
			}
		}
	}
	text := c.pinfsRun(t, 0, "list").stdout
	if !lineWith(text, runID, c.f.digest, "crashed") || !lineWith(text, "other-"+runID, "ended") {
		t.Errorf("run list's text lacks a run or its state:\n%s", text)
	}
}
