package bench

import (
	"path"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify/verifytest"
)

func TestParseMem(t *testing.T) {
	t.Parallel()
	status := "Name:\tpinfs\nVmPeak:\t 9000 kB\nVmHWM:\t 2048 kB\nVmRSS:\t 1024 kB\nRssAnon:\t 1000 kB\nRssFile:\t 24 kB\nRssShmem:\t 0 kB\nThreads:\t9\n"
	if got, want := parseMem(status), (memStat{rss: 1024 << 10, hwm: 2048 << 10, anon: 1000 << 10, file: 24 << 10}); got != want {
		t.Errorf("parseMem = %+v, want %+v", got, want)
	}
	// A figure without its unit is not taken for kB.
	if got := parseMem("VmRSS:\t 1024\nVmHWM:\t 2048 kB\n"); got.rss != -1 || got.hwm != 2048<<10 {
		t.Errorf("parseMem of a VmRSS without kB = %+v, want rss -1", got)
	}
	// A kernel thread has no Vm lines: every figure is missing, not 0.
	if got := parseMem("Name:\tkthreadd\nThreads:\t1\n"); got != (memStat{-1, -1, -1, -1}) {
		t.Errorf("parseMem without Vm lines = %+v, want all -1", got)
	}
}

func TestParseDu(t *testing.T) {
	t.Parallel()
	const table = "/c/meta/members/sha256/ab"
	out := "4096\t/c/meta/manifests/sha256/cd\n8192\t/c/meta/manifests/sha256\n3500000000\t" + table + "\n3500004096\t/c/meta/members/sha256\n" +
		"200000000\t/c/meta/index/ab.v1\n3700016384\t/c/meta\n"
	tb, rest, err := parseDu(out, table)
	if err != nil || tb != 3_500_000_000 || rest != 200_016_384 {
		t.Errorf("parseDu = %d, %d, %v; want 3500000000, 200016384", tb, rest, err)
	}
	// No copy of the table: the whole of meta is the rest.
	tb, rest, err = parseDu("4096\t/c/meta/x\n8192\t/c/meta\n", table)
	if err != nil || tb != -1 || rest != 8192 {
		t.Errorf("parseDu without the table = %d, %d, %v; want -1, 8192", tb, rest, err)
	}
	for _, bad := range []string{"", "du: cannot access\n", "12 /c/meta\n"} {
		if _, _, err := parseDu(bad, table); err == nil {
			t.Errorf("parseDu(%q) succeeded", bad)
		}
	}
}

func TestRunShowOpened(t *testing.T) {
	t.Parallel()
	out := "run r1  sha256:00  ended\nmounts\n  vm pid 1  start  2026-12-02T16:05:08Z  end -  ended\n" +
		"consumed  2 members opened, 0 read in full, 0 bytes  (sha256:0d)\n  split train      2 opened, 0 full, 0 bytes\nintegrity  no events\n" +
		"PATH    ID    DIGEST    VERSION    BYTES  FULL\na.jpg  a.jpg  blake3:1  v1  0  false\nb.jpg  b.jpg  blake3:2  v2  0  false\n"
	if o, l, err := runShowOpened(out); err != nil || o != 2 || l != 2 {
		t.Errorf("runShowOpened = %d, %d, %v; want 2, 2", o, l, err)
	}
	if _, _, err := runShowOpened(strings.Replace(out, "consumed  2 members opened", "consumed nothing", 1)); err == nil {
		t.Error("runShowOpened without the consumed line succeeded")
	}
	if _, _, err := runShowOpened(strings.Replace(out, "PATH ", "NAME ", 1)); err == nil {
		t.Error("runShowOpened without the member list succeeded")
	}
}

// treeEntries counts what a walk of every member's path would find.
func TestTreeEntries(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 950, 1000, 2500} { // 950 and up have a val split
		seen := map[string]bool{".": true}
		for i := range n {
			for p := verifytest.Path(i, n); !seen[p]; p = path.Dir(p) {
				seen[p] = true
			}
		}
		if got := treeEntries(n); got != len(seen) {
			t.Errorf("treeEntries(%d) = %d, want %d", n, got, len(seen))
		}
	}
}

func TestDirOf(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 950, 2500} {
		dir, count := dirOf(n)
		got := 0
		for i := range n {
			if path.Dir(verifytest.Path(i, n)) == dir {
				got++
			}
		}
		if got != count || count == 0 {
			t.Errorf("dirOf(%d) = %s with %d members; it holds %d", n, dir, count, got)
		}
	}
}
