package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store/storetest"
)

// inputCase is one command line that reads a local file the caller names,
// with that file replaced by something pinfs must refuse.
type inputCase struct {
	name string
	args func(t *testing.T, st, file string) []string // the command line reading file, in store st
	file string                                       // the name of the file it reads
	code int                                          // its exit code when file is refused
	big  int64                                        // a size above its limit (0: TestPlanFileRefusedOversized)
	want string                                       // the limit, as the refusal names it
	mode os.FileMode                                  // the oversized file's mode
}

// inputCases are the command-line inputs, each with the exit code of the
// command's own conventions (a bad --revoke file is a usage error).
func inputCases() []inputCase {
	const policyNaming = `{"approvers": ["alice.pub"], "threshold": 1}`
	oneFile := map[string]string{"train/a": "alpha"}
	return []inputCase{
		{name: "--policy", file: "policy.json", code: exitFailed, big: 16<<20 + 1, want: "more than 16 MiB", mode: 0o644,
			args: func(t *testing.T, st, file string) []string {
				return []string{"verify", "--store", st, "--policy", file, pinFiles(t, st, oneFile)}
			}},
		{name: "a key file the policy names", file: "alice.pub", code: exitFailed, big: 64<<10 + 1, want: "more than 64 KiB", mode: 0o644,
			args: func(t *testing.T, st, file string) []string {
				policy := filepath.Join(filepath.Dir(file), "policy.json")
				if err := os.WriteFile(policy, []byte(policyNaming), 0o644); err != nil {
					t.Fatal(err)
				}
				return []string{"verify", "--store", st, "--policy", policy, pinFiles(t, st, oneFile)}
			}},
		{name: "--revoke", file: "revoked.txt", code: exitUsage, big: 16<<20 + 1, want: "more than 16 MiB", mode: 0o644,
			args: func(t *testing.T, st, file string) []string {
				return []string{"fence", "support", "--tombstone", "1", "--revoke", file, "--store", st}
			}},
		{name: "derive --check RECORD-FILE", file: "slice.json", code: exitFailed, big: 64<<10 + 2, want: "more than 64 KiB", mode: 0o644,
			args: func(t *testing.T, st, file string) []string {
				return []string{"derive", "--store", st, "--cache-dir", filepath.Join(filepath.Dir(file), "cache"), "--check", file}
			}},
		{name: "approve --key", file: "alice.key", code: exitFailed, big: 64<<10 + 1, want: "more than 64 KiB", mode: 0o600,
			args: func(t *testing.T, st, file string) []string {
				return []string{"approve", "--store", st, "--key", file, pinFiles(t, st, oneFile)}
			}},
		{name: "pin --plan", file: "plan.json", code: exitFailed,
			args: func(t *testing.T, st, file string) []string {
				return []string{"pin", "--shard", "0", "--plan", file, "--store", st}
			}},
	}
}

// runInput runs c's command line, reading file, within storetest.Soon, and
// checks that it is refused with c's exit code and one line naming file
// and each of want.
func runInput(t *testing.T, c inputCase, st, file string, want ...string) {
	t.Helper()
	args := c.args(t, st, file)
	var code int
	var out, errOut string
	storetest.Soon(t, c.name, func() error {
		code, out, errOut = runPinfs(t, args...)
		return nil
	})
	if code != c.code || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, file) {
		t.Fatalf("%s: exit %d, stdout %q, stderr %q; want exit %d and one line naming %s", c.name, code, out, errOut, c.code, file)
	}
	for _, w := range want {
		if !strings.Contains(errOut, w) {
			t.Errorf("%s: %q does not say %q", c.name, errOut, w)
		}
	}
}

// TestCommandLineFilesRefuseFIFO: a FIFO given as any file a command reads
// (a policy, a key file it names, a revocation list, a derivation record,
// a signing key, a plan) fails at once, with one line naming it, instead
// of blocking the command until something writes to it.
func TestCommandLineFilesRefuseFIFO(t *testing.T) {
	for _, c := range inputCases() {
		t.Run(c.name, func(t *testing.T) {
			st := t.TempDir()
			fifo := filepath.Join(t.TempDir(), c.file)
			storetest.MakeFIFO(t, fifo)
			runInput(t, c, st, fifo, "FIFO, not a regular file")
		})
	}
}

// TestCommandLineFilesRefuseOversized: a file larger than pinfs reads of
// its kind is refused before it is read, with one line naming the file
// and the limit. The files are sparse: nothing is written.
func TestCommandLineFilesRefuseOversized(t *testing.T) {
	for _, c := range inputCases() {
		if c.big == 0 {
			continue // TestPlanFileRefusedOversized
		}
		t.Run(c.name, func(t *testing.T) {
			runInput(t, c, t.TempDir(), sparseFile(t, c.file, c.big, c.mode), c.want)
		})
	}
}

// TestPlanFileRefusedOversized: a --plan file above 16 GiB (a sparse one)
// is refused from its size, not read into memory.
func TestPlanFileRefusedOversized(t *testing.T) {
	c := inputCases()[len(inputCases())-1]
	runInput(t, c, t.TempDir(), sparseFile(t, c.file, 16<<30+1, 0o644), "more than 16 GiB")
}

// sparseFile makes a file of size bytes, none of them written, in a new
// directory.
func sparseFile(t *testing.T, name string, size int64, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return p
}
