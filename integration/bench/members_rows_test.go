package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// membersLsDir times `ls -la` of one directory of the mount m of n
// members, before any walk, so that the kernel has none of its entries.
func (b *bench) membersLsDir(t *testing.T, m *mount, label string, n int) {
	dir, count := dirOf(n)
	s0 := b.sample(m.pid)
	r := run(5*time.Minute, nil, "sh", "-c", "ls -la "+filepath.Join(m.dir, dir)+" | wc -l")
	lm := b.done(fmt.Sprintf("%s: ls -la of %s (%d files)", label, dir, count), s0, m.pid, 0, r.cpu)
	if r.err != nil {
		t.Fatalf("ls -la %s: %v\n%s", dir, r.err, r.stderr)
	}
	b.limit(fmt.Sprintf("%s: `ls -la` of one directory of %d files, first listing in the mount", label, count),
		r.wall.Seconds(), targetMembersLsDirS, "s", "—")
	// ls -la prints "total", "." and ".." besides the files.
	if got, _ := strconv.Atoi(strings.TrimSpace(r.stdout)); got != count+3 {
		b.rows[len(b.rows)-1].verdict = "no (count)"
		t.Errorf("ls -la %s printed %d lines, want %d", dir, got, count+3)
	}
	b.note("%s: `ls -la` of %s: %.3f s wall, daemon %.2f s CPU", label, dir, r.wall.Seconds(), lm.daemon)
}

// membersFind times `find MNT | wc -l` over the whole mount and reads the
// daemon's memory after it.
func (b *bench) membersFind(t *testing.T, m *mount, label string, n int) {
	s0 := b.sample(m.pid)
	r := run(10*time.Minute, nil, "sh", "-c", "find "+m.dir+" | wc -l")
	fm := b.done(label+": find MNT \\| wc -l", s0, m.pid, 0, r.cpu)
	if r.err != nil {
		t.Fatalf("find: %v\n%s", r.err, r.stderr)
	}
	want := treeEntries(n)
	b.limit(fmt.Sprintf("%s: `find MNT \\| wc -l` (%d entries)", label, want), r.wall.Seconds(), targetMembersFindS, "s", "—")
	if got, _ := strconv.Atoi(strings.TrimSpace(r.stdout)); got != want {
		b.rows[len(b.rows)-1].verdict = "no (count)"
		t.Errorf("find counted %d entries, want %d", got, want)
	}
	mem := procMem(m.pid)
	b.limitRow(row{scenario: label + ": daemon peak RSS (VmHWM) through the first mount and find", pinfs: mb(mem.hwm), cpu: "—"},
		float64(mem.hwm)/1e9, targetMembersPeakGB, "GB")
	b.limitRow(row{scenario: label + ": daemon VmRSS after find, per member", other: mem.String(), cpu: "—"},
		float64(mem.rss)/float64(n), targetMembersBytesPerMember, "B/member")
	b.note("%s: find took %.2f s: daemon %.2f s CPU, find and wc %.2f s; daemon after it: %s", label, r.wall.Seconds(), fm.daemon, fm.reader, mem)
}

// membersPinfsLs times `pinfs ls DIGEST DIR` of one directory, with the
// mount's cache dir where pinfs ls takes one.
func (b *bench) membersPinfsLs(t *testing.T, label string, d verify.Digest, store, cache string, n int) {
	dir, count := dirOf(n)
	args := []string{"ls", string(d), dir, "--store", store}
	if b.lsCacheDir() {
		args = append(args, "--cache-dir", cache)
	}
	r, rss := b.timed(label+": pinfs ls of one directory", b.bin, args...)
	if r.err != nil {
		t.Errorf("pinfs %s: %v\n%s", strings.Join(args, " "), r.err, r.stderr)
		return
	}
	b.limit(fmt.Sprintf("%s: `pinfs ls DIGEST %s` (%d members)", label, dir, count), r.wall.Seconds(), targetMembersPinfsLsS, "s", "—")
	if got := strings.Count(r.stdout, "\n"); got != count+1 { // a header line
		b.rows[len(b.rows)-1].verdict = "no (count)"
		t.Errorf("pinfs ls %s printed %d lines, want %d", dir, got, count+1)
	}
	b.note("%s: `pinfs %s`: %.2f s wall, %.2f s CPU, peak RSS %s", label, strings.Join(args, " "), r.wall.Seconds(), r.cpu, mb(rss))
}

// lsCacheDir reports whether this pinfs ls takes --cache-dir (today's
// reads the store only).
func (b *bench) lsCacheDir() bool {
	r := run(time.Minute, nil, b.bin, "ls", "--help")
	return strings.Contains(r.stdout+r.stderr, "--cache-dir")
}

// membersOpen opens every hundredth member of mount m (n members), which
// makes its run one that read 1 % of them, and returns how many it opened.
// `head -c 0` opens a file and reads nothing: the objects do not exist.
func (b *bench) membersOpen(t *testing.T, m *mount, label string, n int) int {
	var sb strings.Builder
	opened := 0
	for i := 0; i < n; i += 100 {
		sb.WriteString(filepath.Join(m.dir, verifytest.Path(i, n)) + "\n")
		opened++
	}
	list := filepath.Join(t.TempDir(), "open.txt")
	if err := os.WriteFile(list, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s0 := b.sample(m.pid)
	r := run(10*time.Minute, nil, "sh", "-c", "xargs -d '\\n' -a "+list+" head -q -c 0")
	om := b.done(fmt.Sprintf("%s: open %d members (head -c 0)", label, opened), s0, m.pid, 0, r.cpu)
	if r.err != nil {
		t.Fatalf("opening 1 %% of the members: %v\n%s", r.err, firstLine(r.stderr))
	}
	b.info(fmt.Sprintf("%s: open every hundredth member (%d, `xargs head -c 0`, after find)", label, opened), secs(r.wall), "", "", "", "—")
	b.note("%s: %d opens took %.2f s: daemon %.2f s CPU, xargs and head %.2f s", label, opened, r.wall.Seconds(), om.daemon, om.reader)
	return opened
}

// membersRunShow times `pinfs run show --members` of the run that opened
// opened members, and checks that it lists them.
func (b *bench) membersRunShow(t *testing.T, label, runID, record, store, cache string, opened int) {
	args := []string{"run", "show", runID, "--run-record", record, "--store", store, "--cache-dir", cache, "--members"}
	r, rss := b.timed(label+": pinfs run show --members", b.bin, args...)
	if r.err != nil {
		t.Errorf("pinfs %s: %v\n%s", strings.Join(args, " "), r.err, r.stderr)
		return
	}
	b.limit(fmt.Sprintf("%s: `pinfs run show --members` of a run that opened 1 %% of them (%d)", label, opened),
		r.wall.Seconds(), targetMembersRunShowS, "s", "—")
	if o, l, err := runShowOpened(r.stdout); err != nil || o != opened || l != opened {
		b.rows[len(b.rows)-1].verdict = "no (output)"
		t.Errorf("pinfs run show --members: %d opened, %d listed (%v); want %d", o, l, err, opened)
	}
	b.note("%s: `pinfs run show --members`: %.2f s wall, %.2f s CPU, peak RSS %s, %d bytes of output",
		label, r.wall.Seconds(), r.cpu, mb(rss), len(r.stdout))
}

// membersDu reports what the cache dir keeps under meta: its copy of the
// table, and the rest (the manifest, and the index that issue 26 adds).
func (b *bench) membersDu(t *testing.T, label, cache string, td verify.Digest) {
	meta := filepath.Join(cache, "meta")
	r := run(5*time.Minute, nil, "du", "-a", "-B1", meta)
	if r.err != nil {
		t.Errorf("du -a -B1 %s: %v\n%s", meta, r.err, r.stderr)
		return
	}
	table, rest, err := parseDu(r.stdout, filepath.Join(meta, filepath.FromSlash(verify.MembersKey(td))))
	if err != nil {
		t.Errorf("du -a -B1 %s: %v", meta, err)
		return
	}
	cell := "no copy"
	if table >= 0 {
		cell = mb1(table)
	}
	b.info(label+": on disk (du) under <cache-dir>/meta: the copy of the member table / everything else", cell+" / "+mb1(rest), "", "", "", "—")
	var files []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if size, p, ok := strings.Cut(line, "\t"); ok {
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				files = append(files, strings.TrimPrefix(p, meta+"/")+" "+size)
			}
		}
	}
	b.note("%s: files under <cache-dir>/meta (du -a -B1): %s", label, strings.Join(files, ", "))
}

// mb1 is v bytes in MB to a tenth: the manifest alone is a few kB.
func mb1(v int64) string { return fmt.Sprintf("%.1f MB", float64(v)/1e6) }
