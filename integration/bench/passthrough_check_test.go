package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPassedThrough holds the rule that makes a passthrough row count:
// passthrough on, at least one passthrough open, and (almost) no bytes
// served by the daemon. It runs without PINFS_BENCH.
func TestPassedThrough(t *testing.T) {
	const size = 1 << 30
	on := ptStatus{Enabled: true, Opens: 1}
	cases := []struct {
		name string
		r    ptResult
		ok   bool
		why  string
	}{
		{"served by passthrough", ptResult{status: on, tot: map[string]int64{"bytes_served": 0}}, true, ""},
		{"a few bytes through the daemon", ptResult{status: on, tot: map[string]int64{"bytes_served": 4096}}, true, ""},
		{"no status", ptResult{status: ptStatus{Err: `pinfs status --json has no "passthrough"`}, tot: map[string]int64{}}, false, "no \"passthrough\""},
		{"passthrough off", ptResult{status: ptStatus{Reason: "no CAP_SYS_ADMIN"}, tot: map[string]int64{}}, false, "passthrough off: no CAP_SYS_ADMIN"},
		{"no passthrough open", ptResult{status: ptStatus{Enabled: true}, tot: map[string]int64{}}, false, "0 passthrough opens"},
		{"no run_end", ptResult{status: on}, false, "no run_end"},
		{"served by the daemon", ptResult{status: on, tot: map[string]int64{"bytes_served": size}}, false, "served 1073741824 of the"},
	}
	for _, c := range cases {
		ok, why := c.r.passedThrough(size)
		if ok != c.ok || !strings.Contains(why, c.why) {
			t.Errorf("%s: passedThrough = %v, %q; want %v, %q", c.name, ok, why, c.ok, c.why)
		}
	}
}

// TestPTJudgeFails: a row that was not served by passthrough fails in its
// verdict, whatever its ratio.
func TestPTJudgeFails(t *testing.T) {
	b := &bench{}
	b.ptJudge(row{scenario: "x"}, 5, true, 0.8, false, "passthrough off: why")
	b.ptJudge(row{scenario: "y"}, 5, true, 0.8, true, "")
	if v := b.rows[0].verdict; !strings.Contains(v, "failed: not served by passthrough") || !strings.Contains(v, "why") {
		t.Errorf("verdict of a row not served by passthrough: %q", v)
	}
	if v := b.rows[1].verdict; v != "yes" {
		t.Errorf("verdict of a passthrough row above its target: %q, want yes", v)
	}
}

// TestCheckMemberFile: the dd baselines and the epoch's direct readers
// read only a regular whole-member file of the member's size, mode 0400.
func TestCheckMemberFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	write := func(p string, n int, mode os.FileMode) {
		if err := os.WriteFile(p, make([]byte, n), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write(good, 10, 0o400)
	write(filepath.Join(dir, "mode"), 10, 0o600)
	if err := os.Symlink(good, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := checkMemberFile(good, 10); err != nil {
		t.Errorf("a good file: %v", err)
	}
	for name, want := range map[string]string{"missing": "no whole-member", "link": "not a regular file", "mode": "mode", "good": "has 10 bytes"} {
		size := int64(10)
		if name == "good" {
			size = 11
		}
		if err := checkMemberFile(filepath.Join(dir, name), size); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", name, err, want)
		}
	}
}

// TestColdCell: the cold row's spread is (max − min) / mean of the runs.
func TestColdCell(t *testing.T) {
	ms := []measure{{bytes: 1e9, wall: time.Second}, {bytes: 1e9, wall: 2 * time.Second}}
	if got, want := coldCell(ms), "1.000 / 0.500 GB/s (mean 0.750, spread 67 %)"; got != want {
		t.Errorf("coldCell = %q, want %q", got, want)
	}
}
