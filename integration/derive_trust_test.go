package integration

// What a store writer cannot make pinfs derive do (issue 22, item 3): a
// record planted in the store for an output digest is never run by
// --check, which runs only the command of the caller's record file or the
// one given after --; and no transform sees the storage credentials unless
// the caller passes them with --pass-env.

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
	record "github.com/pinfs/pinfs/verify/derive"
)

// TestDeriveCheckRunsOnlyTheCallersCommand, on a local store and on
// versitygw (where pinfs itself needs the credentials to read the store).
func TestDeriveCheckRunsOnlyTheCallersCommand(t *testing.T) {
	t.Parallel()
	eachDeriveStore(t, func(t *testing.T, ds *deriveStore) {
		f := newDeriveFix(t, ds)
		secret := envValue(f.env, "AWS_SECRET_ACCESS_KEY")
		if secret == "" { // the local store needs none: give the job some
			secret = "local-job-secret"
			f.env = append(slices.Clone(f.env), "AWS_ACCESS_KEY_ID=local-job-key", "AWS_SECRET_ACCESS_KEY="+secret)
		}
		seen := filepath.Join(f.root, "seen")
		script := f.script(t, "copy.sh", `printf '%s\n' "${AWS_SECRET_ACCESS_KEY-unset} ${AWS_ACCESS_KEY_ID-unset}" > '`+seen+`'
cp "$PINFS_INPUT_raw/a.txt" "$PINFS_OUTPUT/a.txt"
`)
		recFile := filepath.Join(f.root, "slice.json")
		args := []string{"--input", "raw=" + f.raw, "--transform", "copy@v1", "--", "sh", script}
		out := f.derive(t, 0, nil, append([]string{"--record", recFile}, args...)...).lastLine()
		if got := readFileOr(t, seen); got != "unset unset\n" {
			t.Errorf("derive: the transform saw AWS_SECRET_ACCESS_KEY AWS_ACCESS_KEY_ID = %q, want both unset", got)
		}
		// A store writer adds a valid record of the same output whose
		// command steals the secret.
		stolen := filepath.Join(f.root, "stolen")
		planted := plantRecord(t, f, out, "sh", "-c",
			`printf %s "$AWS_SECRET_ACCESS_KEY" > '`+stolen+`'; echo x > "$PINFS_OUTPUT/x"`)
		runs := f.runs(t)
		for _, target := range []string{out, string(planted)} {
			r := pinfs(t, f.env, "derive", "--store", f.store, "--cache-dir", f.cache, "--work-dir", f.work, "--check", target)
			f.checkClean(t)
			if _, err := os.Stat(stolen); err == nil {
				t.Fatalf("--check %s ran the store's command: it wrote the secret (%v)", target, r)
			}
			if r.code != 2 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 ||
				!strings.Contains(r.stderr, "pass the record file from your checkout") || f.runs(t) != runs {
				t.Errorf("--check %s alone: want exit 2, one line on how to pass the record file, nothing run: %v", target, r)
			}
		}

		// Passed with --pass-env, the secret is seen.
		pass := append([]string{"--force", "--pass-env", "AWS_SECRET_ACCESS_KEY"}, args...)
		f.derive(t, 0, []string{"reproduced " + out}, pass...)
		if got := readFileOr(t, seen); got != secret+" unset\n" {
			t.Errorf("derive --pass-env AWS_SECRET_ACCESS_KEY: the transform saw %q, want the secret and no key id", got)
		}

		// The record file from the caller's checkout runs and matches, as
		// does the digest with the command given after --; the planted
		// record is skipped, and the transform sees no credentials.
		os.Remove(seen)
		for _, check := range [][]string{{recFile}, {recFile, "--", "sh", script}, {out, "--", "sh", script}} {
			r := f.derive(t, 0, []string{"derivation " + readRecord(t, recFile).Key + " reproduced " + out}, append([]string{"--check"}, check...)...)
			if check[0] == out && !strings.Contains(r.stderr, "skipped 1 record") {
				t.Errorf("--check %q: the planted record is not said to be skipped: %v", check, r)
			}
			if fromStore := strings.Contains(r.stderr, "from the store: transform"); fromStore != (check[0] == out) {
				t.Errorf("--check %q: the inputs and params of the store's record shown: %v, want %v: %v", check, fromStore, check[0] == out, r)
			}
			if got := readFileOr(t, seen); got != "unset unset\n" {
				t.Errorf("--check %q: the transform saw %q, want no credentials", check, got)
			}
		}
		runs = f.runs(t)
		for _, check := range [][]string{{recFile, "--", "sh", "-c", "true"}, {string(planted), "--", "sh", script}} {
			r := f.derive(t, 1, []string{"is not the command of record"}, append([]string{"--check"}, check...)...)
			if r.stdout != "" || f.runs(t) != runs || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("--check %q: want a one-line refusal and nothing run: %v", check, r)
			}
		}
		if _, err := os.Stat(stolen); err == nil {
			t.Errorf("the store's command ran")
		}
	})
}

// plantRecord writes, as a store writer could, a valid derivation record
// of f's raw input whose output is out and whose command is command, and
// returns its key.
func plantRecord(t *testing.T, f *deriveFix, out string, command ...string) verify.Digest {
	t.Helper()
	r, err := record.New([]record.Input{{Name: "raw", Digest: verify.Digest(f.raw)}}, "copy@v1", nil, command, "dir")
	if err != nil {
		t.Fatal(err)
	}
	r.Output, r.Time = verify.Digest(out), "2026-12-01T00:00:00Z"
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	f.put(t, "derivations/sha256/"+r.Key.Hex(), b)
	f.put(t, "derivations/outputs/sha256/"+r.Output.Hex()+"/"+r.Key.Hex(), b)
	return r.Key
}

// envValue is the value of name in env (NAME=VALUE entries), or "".
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}
