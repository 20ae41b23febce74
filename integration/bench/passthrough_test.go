package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// ptWait bounds how long a passthrough mount may take to switch
// passthrough on after it serves (the probe runs once the server is up).
const ptWait = 10 * time.Second

// passthrough is the issue 25 scenario: the 1 GiB member read from a
// disk cache dir `pinfs warm` filled, through a new mount with passthrough
// (the default) and with --passthrough=false, next to `dd` of the member's
// cache file from the disk and from the page cache; the daemon's CPU per
// GB; an epoch over 4.5 GiB of small and 1 GiB members (ptEpoch); and the
// cold first epoch with passthrough on and off (ptCold). A passthrough row
// whose mount did not serve the member by passthrough fails the test: a
// fast row that measured today's path would say the wrong thing.
func (b *bench) passthrough(t *testing.T) {
	rows := []row{
		{scenario: "passthrough: 1 GiB disk-cache remount, page cache dropped: vs `dd` of its cache file", target: fmt.Sprintf("≥ %.2f × dd", targetPTVsDD)},
		{scenario: "passthrough: the same read vs --passthrough=false (today's path, same run)", target: fmt.Sprintf("≥ %.2f × --passthrough=false", targetPTVsOld)},
		{scenario: "passthrough: 1 GiB disk-cache remount, cache file in the page cache: vs `dd` of it", target: fmt.Sprintf("≥ %.2f × page cache", targetPTCachedVsPageCache)},
		{scenario: "passthrough: daemon CPU per GB of the disk-cache remount (the open-time verification)", target: fmt.Sprintf("≤ %g s/GB", targetPTCPUPerGB)},
		{scenario: ptEpochScenario, target: fmt.Sprintf("≥ %.2f × direct", targetPTEpochVsDirect)},
	}
	var why string
	switch {
	case !b.hasPT:
		why = "this pinfs mount has no --passthrough"
	case !b.hasWarm:
		why = "this pinfs has no `warm` command"
	}
	if why != "" {
		for _, r := range rows {
			b.notRun(r, why)
		}
		b.note("passthrough: %s", why)
		return
	}

	b.note("passthrough rows: the cache dir is filled by `pinfs warm` (not measured); each pinfs row is a new mount on it (cache-mem 64MiB) "+
		"that waits until `pinfs status --json` says passthrough is on, then reads; a row counts as passthrough only with "+
		"\"passthrough\".opens ≥ 1 and run_end bytes_served under 1 %% of the bytes read, and fails the test otherwise. "+
		"The `dd` baselines read <cache-dir>/blocks/<hh>/<hex>, the member's whole-member file; the epoch's direct baseline reads "+
		"all 2004 such files with the same %d goroutines (1 MiB reads, the 1 GiB members first) as the mount's readers.", ptEpochReaders)
	big := b.memberOf(t, b.bigDigest, bigMember)
	cache := t.TempDir()
	b.ptWarm(t, "passthrough fixture: `pinfs warm` of the 1 GiB member", b.bigDigest, cache, bigSize, "--cache-disk", "4GiB")
	file := memberFile(t, cache, big)
	if err := checkMemberFile(file, bigSize); err != nil {
		for _, r := range rows[:4] {
			b.notRun(r, err.Error())
		}
		t.Errorf("after pinfs warm of the 1 GiB member: %v", err)
	} else {
		b.ptRemount(t, rows, cache, file)
	}
	b.ptEpoch(t, rows[4])
	b.ptCold(t)
}

// ptRemount measures rows 1–3 of the scenario on cache, which holds the
// 1 GiB member's whole-member file at file.
func (b *bench) ptRemount(t *testing.T, rows []row, cache, file string) {
	// Row 1: everything from the disk.
	dropCaches(t)
	disk := b.dd(t, "dd bs=1M of the 1 GiB member's cache file, page cache dropped", file, 0, bigSize)
	pt := b.ptRead(t, "1 GiB disk-cache remount, passthrough, page cache dropped", cache, true, true, false)
	old := b.ptRead(t, "1 GiB disk-cache remount, --passthrough=false, page cache dropped", cache, false, true, false)
	ok, why := pt.passedThrough(bigSize)
	if !ok {
		t.Errorf("passthrough row: the mount did not serve the member by passthrough: %s", why)
	}
	r := rows[0]
	r.pinfs, r.cpu = gbs(pt.m.gbps())+pt.cell(), perGB(pt.m.daemon, pt.m.bytes)
	r.other = gbs(disk.gbps()) + " (dd bs=1M of <cache-dir>/blocks/hh/hex)"
	b.ptJudge(r, pt.m.gbps()/disk.gbps(), true, targetPTVsDD, ok, why)
	r = rows[1]
	r.pinfs, r.cpu = gbs(pt.m.gbps()), perGB(pt.m.daemon, pt.m.bytes)
	r.other = gbs(old.m.gbps()) + fmt.Sprintf(" (--passthrough=false; daemon %s s/GB)", perGB(old.m.daemon, old.m.bytes))
	b.ptJudge(r, pt.m.gbps()/old.m.gbps(), true, targetPTVsOld, ok, why)

	// Row 2: the cache file in the page cache, as in an epoch that fits
	// in RAM. The new mount verifies the file once before its first
	// hand-over; a second read in the same mount shows the rate without.
	b.dd(t, "dd bs=1M of the cache file, first read (fills the page cache)", file, 0, bigSize)
	var pc measure
	for i := range 2 {
		m := b.dd(t, fmt.Sprintf("dd bs=1M of the cache file in the page cache, read %d", i+1), file, 0, bigSize)
		if i == 0 || m.gbps() > pc.gbps() {
			pc = m
		}
	}
	ptc := b.ptRead(t, "1 GiB disk-cache remount, passthrough, cache file in the page cache", cache, true, false, true)
	okc, whyc := ptc.passedThrough(bigSize)
	if !okc {
		t.Errorf("passthrough row (page cache): the mount did not serve the member by passthrough: %s", whyc)
	}
	r = rows[2]
	r.pinfs, r.cpu = gbs(ptc.m.gbps())+ptc.cell(), perGB(ptc.m.daemon, ptc.m.bytes)
	r.other = gbs(pc.gbps()) + " (dd of the cache file in the page cache, best of 2)"
	b.ptJudge(r, ptc.m.gbps()/pc.gbps(), true, targetPTCachedVsPageCache, okc, whyc)
	b.infoRow(row{scenario: "passthrough: the same, a second read in the same mount (file already verified)",
		pinfs: gbs(ptc.again.gbps()), other: gbs(pc.gbps()) + " (page cache)",
		ratio: fmt.Sprintf("%.2f", ptc.again.gbps()/pc.gbps()), cpu: perGB(ptc.again.daemon, ptc.again.bytes)})

	// Row 3: the daemon's CPU in row 1's reads.
	r = rows[3]
	r.cpu = perGB(pt.m.daemon, pt.m.bytes)
	r.other = perGB(old.m.daemon, old.m.bytes) + " s/GB (--passthrough=false, same read)"
	b.limitRow(r, pt.m.daemon/(float64(pt.m.bytes)/1e9), targetPTCPUPerGB, "s/GB")
	b.failIfNot(ok, why)
	b.infoRow(row{scenario: "passthrough: daemon CPU per GB of the same read with --passthrough=false",
		pinfs: perGB(old.m.daemon, old.m.bytes) + " s/GB", cpu: perGB(old.m.daemon, old.m.bytes)})
}

// ptResult is one read of the 1 GiB member through a new mount, with
// what the mount said about passthrough.
type ptResult struct {
	m, again measure // the read, and a second one in the same mount (when asked)
	status   ptStatus
	tot      map[string]int64 // run_end totals (nil when missing)
}

// ptRead mounts the 1 GiB member on cache (cache-mem 64MiB, so the
// memory tier cannot hold it), passthrough on (the default) or
// --passthrough=false, waits for passthrough to switch on, drops the page
// cache if drop, reads the member once with dd (twice if again), asks the
// mount's status and unmounts. Every block must come from the disk tier.
func (b *bench) ptRead(t *testing.T, name, cache string, pt, drop, again bool) ptResult {
	t.Helper()
	flags := []string{"--cache-mem", "64MiB", "--cache-disk", "4GiB"}
	if !pt {
		flags = append(flags, "--passthrough=false")
	}
	m := b.mount(t, name, b.env, b.bigDigest, storeURL, cache, flags...)
	if pt {
		b.waitPT(t, m)
	}
	if drop {
		dropCaches(t)
	}
	var r ptResult
	file := filepath.Join(m.dir, bigMember)
	r.m = b.dd(t, "pinfs "+name, file, m.pid, bigSize)
	if again {
		r.again = b.dd(t, "pinfs "+name+", second read, same mount", file, m.pid, bigSize)
	}
	r.status = b.ptStatusOf(t, m)
	r.tot = b.finish(t, m)
	if r.tot != nil && r.tot["network_fetches"] != 0 {
		t.Errorf("%s: %d network fetches from a cache dir pinfs warm filled", name, r.tot["network_fetches"])
	}
	t.Logf("%s: passthrough %+v", name, r.status)
	return r
}

// passedThrough reports whether the mount served a member of size bytes
// by passthrough: passthrough on, at least one passthrough open, and
// (almost) none of its bytes served by the daemon; or why not.
func (r ptResult) passedThrough(size int64) (bool, string) {
	s := r.status
	switch {
	case s.Err != "":
		return false, s.Err
	case !s.Enabled:
		return false, "passthrough off: " + dash(s.Reason)
	case s.Opens < 1:
		return false, "`pinfs status --json` counts 0 passthrough opens"
	case r.tot == nil:
		return false, "no run_end in the run record"
	case r.tot["bytes_served"] > size/100:
		return false, fmt.Sprintf("the daemon served %d of the %d bytes itself (run_end bytes_served)", r.tot["bytes_served"], size)
	}
	return true, ""
}

// cell is what the pinfs cell adds to the rate: the passthrough opens and
// the bytes the daemon served itself.
func (r ptResult) cell() string {
	served := "—"
	if r.tot != nil {
		served = fmt.Sprint(r.tot["bytes_served"])
	}
	return fmt.Sprintf(" (%d passthrough opens, bytes_served %s)", r.status.Opens, served)
}

// ptJudge is judge for a passthrough row: one whose mount did not serve
// by passthrough says so in its verdict, whatever its ratio.
func (b *bench) ptJudge(r row, ratio float64, atLeast bool, target float64, ok bool, why string) {
	b.judge(r, ratio, atLeast, target, "")
	b.failIfNot(ok, why)
}

// failIfNot marks the last row failed when its read was not served by
// passthrough.
func (b *bench) failIfNot(ok bool, why string) {
	if !ok {
		b.rows[len(b.rows)-1].verdict = "**failed: not served by passthrough** (" + why + ")"
	}
}

// ptStatus is the "passthrough" object of `pinfs status MOUNTPOINT
// --json`; Err says why there is none.
type ptStatus struct {
	Enabled bool   `json:"enabled"`
	Reason  string `json:"reason"`
	Opens   int64  `json:"opens"`
	Bytes   int64  `json:"bytes"`
	Err     string `json:"-"`
}

// ptStatusOf asks the mount for its passthrough status.
func (b *bench) ptStatusOf(t *testing.T, m *mount) ptStatus {
	t.Helper()
	r := run(30*time.Second, nil, b.bin, "status", m.dir, "--json")
	var st struct {
		Passthrough *ptStatus `json:"passthrough"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		return ptStatus{Err: fmt.Sprintf("pinfs status --json: %v (%v: %s)", err, r.err, firstLine(r.stderr))}
	}
	if st.Passthrough == nil {
		return ptStatus{Err: "pinfs status --json has no \"passthrough\""}
	}
	return *st.Passthrough
}

// waitPT waits (at most ptWait) until m says passthrough is on, or off
// with a reason: the mount serves before its probe has decided (off, no
// reason yet), and an open before that is served through today's path.
func (b *bench) waitPT(t *testing.T, m *mount) {
	t.Helper()
	deadline := time.Now().Add(ptWait)
	for {
		st := b.ptStatusOf(t, m)
		if st.Enabled || st.Reason != "" || time.Now().After(deadline) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// memberOf returns the member at path of snapshot digest (`pinfs ls --json`).
func (b *bench) memberOf(t *testing.T, digest, path string) verify.Member {
	t.Helper()
	for _, m := range b.members(t, digest) {
		if m.Path == path {
			return m
		}
	}
	t.Fatalf("%s has no member %s", digest, path)
	return verify.Member{}
}

// members returns the member table of snapshot digest (`pinfs ls --json`).
func (b *bench) members(t *testing.T, digest string) []verify.Member {
	t.Helper()
	r := run(5*time.Minute, b.env, b.bin, "ls", digest, "--store", storeURL, "--json")
	if r.err != nil {
		t.Fatalf("pinfs ls %s --json: %v: %s", digest, r.err, r.stderr)
	}
	var ms []verify.Member
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m verify.Member
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("pinfs ls %s --json: %v: %q", digest, err, line)
		}
		ms = append(ms, m)
	}
	return ms
}

// memberFile is m's whole-member file in the disk tier of cache dir
// cache: <cache>/blocks/<hex[:2]>/<hex> (cache.Disk.MemberPath).
func memberFile(t *testing.T, cache string, m verify.Member) string {
	t.Helper()
	d, err := b3.Parse(m.Digest)
	if err != nil {
		t.Fatalf("member %s: digest %q: %v", m.Path, m.Digest, err)
	}
	h := d.Hex()
	return filepath.Join(cache, "blocks", h[:2], h)
}

// checkMemberFile says why path is not a whole-member file of size
// bytes (regular, mode 0400) the mount could hand to the kernel.
func checkMemberFile(path string, size int64) error {
	info, err := os.Lstat(path)
	switch {
	case err != nil:
		return fmt.Errorf("no whole-member cache file: %v", err)
	case !info.Mode().IsRegular():
		return fmt.Errorf("whole-member cache file %s is not a regular file (%v)", path, info.Mode())
	case info.Size() != size:
		return fmt.Errorf("whole-member cache file %s has %d bytes, want %d", path, info.Size(), size)
	case info.Mode().Perm() != 0o400:
		return fmt.Errorf("whole-member cache file %s has mode %v, want 0400", path, info.Mode().Perm())
	}
	return nil
}
