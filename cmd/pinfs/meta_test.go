package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// dropTables removes every member table from local store st, so that a
// command can load one only from a cache dir.
func dropTables(t *testing.T, st string) {
	t.Helper()
	dir := filepath.Join(st, "members")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the store keeps its tables elsewhere: %v", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
}

// TestTableLoadersReadTheCacheDir: pinfs ls, verify --no-head, diff,
// validate (the snapshot and its parent), approve, run show and replay load member tables through --cache-dir, as pinfs mount does: a
// second run with the tables gone from the store gives the same output
// from the copies (and, with the integrator's index, the index) of the
// first. verify with HEADs still checks the store's own copies.
func TestTableLoadersReadTheCacheDir(t *testing.T) {
	t.Setenv("PINFS_STORE", "")
	st, record, _ := recordedRun(t)
	parent := pinFiles(t, st, map[string]string{"train/a": "alpha", "train/gone": "g"})
	child := pinFiles(t, st, map[string]string{"train/a": "alpha", "train/new": "n"}, "--parent", parent)
	key := filepath.Join(t.TempDir(), "alice")
	if code, _, errs := runPinfs(t, "key", "generate", key); code != exitOK {
		t.Fatalf("key generate: exit %d: %s", code, errs)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"ls", []string{"ls", child, "train", "--store", st}},
		{"verify", []string{"verify", child, "--no-head", "--store", st}},
		{"diff", []string{"diff", parent, child, "--store", st}},
		{"validate", []string{"validate", child, "--store", st, "--json"}},
		{"approve", []string{"approve", child, "--store", st, "--key", key + ".key"}},
		{"run show", []string{"run", "show", "r1", "--run-record", record, "--members"}},
		{"run replay", []string{"run", "replay", "r1", "--run-record", record, "--quiet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own := t.TempDir() // a store of its own: dropTables must not race the others
			if err := os.CopyFS(own, os.DirFS(st)); err != nil {
				t.Fatal(err)
			}
			args := append(replaceArg(tc.args, st, own), "--cache-dir", filepath.Join(t.TempDir(), "cache"))
			if tc.name == "run show" || tc.name == "run replay" {
				args = append(args, "--store", own)
			}
			code, first, errs := runPinfs(t, args...)
			if code != exitOK {
				t.Fatalf("pinfs %s: exit %d: %s", tc.name, code, errs)
			}
			dropTables(t, own)
			code, again, errs := runPinfs(t, args...)
			if code != exitOK {
				t.Fatalf("pinfs %s with the tables only in the cache dir: exit %d: %s", tc.name, code, errs)
			}
			if tc.name == "verify" { // with HEADs verify checks the store's own copies
				full := slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "--no-head" })
				if code, out, errs := runPinfs(t, full...); code != exitFailed || !strings.Contains(out, "FAIL manifest") {
					t.Errorf("pinfs verify without --no-head of a store without its table: exit %d, stdout %q, stderr %q", code, out, errs)
				}
			}
			if tc.name == "validate" { // a new report: another time, another digest
				first, again = dropLines(first, "validatedAt", `"report"`), dropLines(again, "validatedAt", `"report"`)
			}
			if tc.name != "approve" && again != first { // approve: a new report and envelope
				t.Errorf("pinfs %s printed\n%s\nfrom the cache dir, and\n%s\nfrom the store", tc.name, again, first)
			}
		})
	}
}

func replaceArg(args []string, old, new string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == old {
			out[i] = new
		}
	}
	return out
}

// dropLines returns s without its lines that contain any of subs.
func dropLines(s string, subs ...string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !containsAny(l, subs) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestTableLoadersCheckTheCacheDir: a --cache-dir that others may write
// is refused as pinfs mount refuses it, before anything is written there;
// the default cache dir in that state is skipped with a warning, and no
// default at all reads the store only: a read-only command still works.
func TestTableLoadersCheckTheCacheDir(t *testing.T) {
	st := t.TempDir()
	d := pinFiles(t, st, map[string]string{"train/a": "alpha"})
	open := func(dir string) string {
		t.Helper()
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	explicit := open(filepath.Join(t.TempDir(), "cache"))
	code, _, errs := runPinfs(t, "ls", d, "--store", st, "--cache-dir", explicit)
	if code != exitFailed || !strings.Contains(errs, "writable by other users") {
		t.Fatalf("ls --cache-dir of a world-writable dir: exit %d, stderr %q; want exit 1 naming why", code, errs)
	}
	if entries, _ := os.ReadDir(explicit); len(entries) > 0 {
		t.Fatalf("ls wrote into a cache dir it refused: %v", entries)
	}

	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	def := open(filepath.Join(xdg, "pinfs"))
	code, out, errs := runPinfs(t, "ls", d, "--store", st)
	if code != exitOK || !strings.Contains(out, "train/a") || !strings.Contains(errs, "without the default cache dir") {
		t.Fatalf("ls with an unsafe default cache dir: exit %d, stdout %q, stderr %q; want the listing and a warning", code, out, errs)
	}
	if entries, _ := os.ReadDir(def); len(entries) > 0 {
		t.Fatalf("ls wrote into an unsafe default cache dir: %v", entries)
	}

	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	if code, out, errs := runPinfs(t, "ls", d, "--store", st); code != exitOK || !strings.Contains(out, "train/a") || errs != "" {
		t.Fatalf("ls without a default cache dir: exit %d, stdout %q, stderr %q; want the listing from the store", code, out, errs)
	}
}
