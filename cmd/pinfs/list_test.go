package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
)

// TestListCommand: pinfs list prints one line per manifest under a
// header, --json one document; a key that does not verify is not listed,
// is named in a warning, and makes the exit status 1.
func TestListCommand(t *testing.T) {
	t.Setenv("PINFS_STORE", "")
	dir := t.TempDir()
	d := putSnapshot(t, dir, nil)

	code, out, errs := runPinfs(t, "list", "--store", dir)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || errs != "" || len(lines) != 2 || !strings.HasPrefix(lines[0], "TIME ") ||
		!strings.Contains(lines[1], "  "+d.String()+"  BUILDING  0 ") {
		t.Fatalf("pinfs list: exit %d, stdout\n%s\nstderr %q", code, out, errs)
	}

	code, out, _ = runPinfs(t, "list", "--store", dir, "--json")
	var l struct {
		Store     string
		Manifests []struct {
			Digest  verify.Digest
			Time    string
			State   string
			Parents []verify.Digest
		}
		Invalid []struct{ Key, Reason string }
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil || code != exitOK {
		t.Fatalf("--json: exit %d, %v:\n%s", code, err, out)
	}
	if l.Store != dir || len(l.Manifests) != 1 || l.Manifests[0].Digest != d || l.Manifests[0].Time == "" ||
		l.Manifests[0].Parents == nil || l.Invalid == nil {
		t.Errorf("--json: %+v", l)
	}

	// A tampered manifest: not listed, a warning, exit 1.
	forged := verify.SHA256([]byte("forged"))
	mb, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(verify.ManifestKey(d))))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(verify.ManifestKey(forged))), mb, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runPinfs(t, "list", "--store", dir)
	if code != exitFailed || strings.Contains(out, forged.String()) || !strings.Contains(out, d.String()) ||
		!strings.Contains(errs, "level=WARN") || !strings.Contains(errs, verify.ManifestKey(forged)) {
		t.Errorf("tampered: exit %d, stdout\n%s\nstderr %q; want exit 1, only %s listed and a warning", code, out, errs, d)
	}
	code, out, _ = runPinfs(t, "list", "--store", dir, "--json")
	if code != exitFailed || json.Unmarshal([]byte(out), &l) != nil || len(l.Manifests) != 1 || len(l.Invalid) != 1 ||
		l.Invalid[0].Key != verify.ManifestKey(forged) {
		t.Errorf("tampered --json: exit %d:\n%s", code, out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"list"}, "pinfs list: --store is required (or set PINFS_STORE)"},
		{[]string{"list", "x", "--store", dir}, "pinfs list: want no arguments, got 1"},
		{[]string{"list", "--jobs", "0", "--store", dir}, "pinfs list: --jobs 0: want at least 1"},
	} {
		code, out, errs := runPinfs(t, c.args...)
		if code != exitUsage || out != "" || strings.TrimSpace(errs) != c.want {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2, %q", c.args, code, out, errs, c.want)
		}
	}
}
