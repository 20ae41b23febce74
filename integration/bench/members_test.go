package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// membersSeed is the seed of the synthetic tables of the members scenario.
const membersSeed = 26

// membersCounts are the sizes of the members scenario: issue 26's ten
// million, and the million whose rows hold today's figures ("no worse").
var membersCounts = []int{1_000_000, 10_000_000}

// membersScenario is issue 26 ("Ten million members"), alone with
// PINFS_BENCH_ONLY=members: for each of membersCounts, an S3-shaped
// synthetic snapshot (verifytest.Table) in a local store, served by the
// real pinfs binary and measured with real tools (sha256sum, find, ls,
// head, du). Its members' objects do not exist, so nothing reads a
// member's bytes: the run that "read" 1 % of them opens each one
// (`head -c 0`), which the consumed set counts as opened.
func (b *bench) membersScenario(t *testing.T) {
	b.note("members rows (issue 26): verifytest.Table(n, verifytest.S3, %d) streamed into a local store; every mount is the real pinfs "+
		"binary (`pinfs mount`, which returns once the mount serves); page cache dropped (sync; echo 3 > /proc/sys/vm/drop_caches) "+
		"before the floor, the first mount and the cold remount; memory from /proc/PID/status of the daemon.", membersSeed)
	for _, n := range membersCounts {
		// A shared machine: wait (bounded) for other work to calm down
		// before each size too, since the run before it took minutes.
		cores, waited := waitQuiet(time.Minute)
		b.note("%s members: %.2f cores busy outside the bench before measuring (waited %s for < 0.3)", countLabel(n), cores, waited.Round(time.Second))
		t.Run(strconv.Itoa(n), func(t *testing.T) { b.membersAt(t, n) })
	}
}

// membersAt measures the rows of the members scenario at n members.
func (b *bench) membersAt(t *testing.T, n int) {
	label := countLabel(n) + " members"
	store := t.TempDir()
	d, td, tableFile := b.membersStore(t, store, n, label)

	// The floor: reading the table once, cold.
	dropCaches(t)
	s0 := b.sample(0)
	fl := run(10*time.Minute, nil, "sha256sum", tableFile)
	b.done(label+": sha256sum of the member table, page cache dropped (floor)", s0, 0, 0, fl.cpu)
	if fl.err != nil || !strings.HasPrefix(fl.stdout, td.Hex()+" ") {
		t.Fatalf("sha256sum %s: %v %q; want %s", tableFile, fl.err, firstLine(fl.stdout+fl.stderr), td.Hex())
	}

	// The first mount: page cache dropped, fresh cache dir.
	cache := t.TempDir()
	runID := fmt.Sprintf("bench-members-%d", n)
	dropCaches(t)
	m := b.mount(t, label+": first mount", nil, string(d), store, cache, "--run-id", runID)
	cpuMount, _ := procCPU(m.pid)
	b.check(label+": first mount (page cache dropped, fresh cache dir) until it serves, vs `sha256sum` of the table read cold",
		secs(m.ready), "sha256sum "+secs(fl.wall), m.ready.Seconds()/fl.wall.Seconds(), false, targetMembersMountVsFloor, "—")
	mounted := procMem(m.pid)
	b.info(label+": daemon memory after the first mount", mounted.String(), "", "", "", "—")
	b.note("%s: the first mount took %.2f s (daemon %.2f s CPU); the floor, `sha256sum` of the %.2f GB table read cold, %.2f s (%.2f s CPU)",
		label, m.ready.Seconds(), cpuMount, float64(fileSize(t, tableFile))/1e9, fl.wall.Seconds(), fl.cpu)

	b.membersLsDir(t, m, label, n)
	b.membersFind(t, m, label, n)
	b.membersPinfsLs(t, label, d, store, cache, n)
	opened := b.membersOpen(t, m, label, n)
	b.finish(t, m)
	b.membersRunShow(t, label, runID, m.record, store, cache, opened)

	// Remounts of the same digest from the same cache dir: as a restarted
	// sidecar finds the machine (page cache warm), and after a drop.
	r := b.mount(t, label+": remount", nil, string(d), store, cache)
	b.limitRow(row{scenario: label + ": remount, same digest and cache dir (page cache warm) until it serves", cpu: "—"},
		r.ready.Seconds(), targetMembersRemountS, "s")
	b.info(label+": daemon memory after the remount", procMem(r.pid).String(), "", "", "", "—")
	b.finish(t, r)
	dropCaches(t)
	rc := b.mount(t, label+": remount, page cache dropped", nil, string(d), store, cache)
	b.info(label+": remount, same cache dir, page cache dropped", secs(rc.ready), "", "", "", "—")
	b.finish(t, rc)

	b.membersDu(t, label, cache, td)
}

// membersStore streams the synthetic table of n members into the local
// store at dir (the table first, as a temporary file renamed to its key
// once its digest is known; then its manifest) and returns the
// snapshot's digest, the table's and the table's file.
func (b *bench) membersStore(t *testing.T, dir string, n int, label string) (d, td verify.Digest, file string) {
	t.Helper()
	t0 := time.Now()
	tmp := filepath.Join(dir, "members", "sha256", ".tmp-bench")
	if err := os.MkdirAll(filepath.Dir(tmp), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	d, td, manifest, err := verifytest.WriteTable(f, n, verifytest.S3, membersSeed)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(dir, filepath.FromSlash(verify.MembersKey(td)))
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	st, err := localstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), verify.ManifestKey(d), manifest); err != nil {
		t.Fatal(err)
	}
	b.note("%s: wrote the member table (%.2f GB) and its manifest %s to a local store in %.1f s",
		label, float64(fileSize(t, file))/1e9, d, time.Since(t0).Seconds())
	return d, td, file
}

// countLabel is n as the rows name it: 10M, 1M, 20k.
func countLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}
