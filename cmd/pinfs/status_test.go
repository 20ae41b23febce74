package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
)

// statusRun runs pinfs status with args in-process.
func statusRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runPinfs(t, append([]string{"status"}, args...)...)
}

func TestMountpointArg(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	digest := "sha256:" + strings.Repeat("ab", 32)
	if err := os.Mkdir(digest, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Mkdir("sha256:abc", 0o700)
	for arg, want := range map[string]bool{
		digest:                     false, // a full digest is a snapshot, even where a directory has its name
		"./" + digest:              true,
		"sha256:" + "00":           false, // a mistyped digest stays a usage error
		"sha256:abc":               true,  // ... unless a path of that name exists
		dir:                        true,
		filepath.Join(dir, "nope"): true,
		"/data/" + digest:          true,
		"":                         false,
	} {
		if got := mountpointArg(arg); got != want {
			t.Errorf("mountpointArg(%q) = %v, want %v", arg, got, want)
		}
	}
}

func TestStatusOfNotAMount(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := statusRun(t, dir)
	if code != exitFailed || out != "" || errs != "pinfs status: "+dir+" is not a pinfs mount\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}

	// --json prints the status in every case; --store and --policy are ignored.
	code, out, errs = statusRun(t, dir, "--json", "--store", "s3://nowhere/p", "--policy", "/nonexistent")
	var st struct {
		Mountpoint string `json:"mountpoint"`
		Serving    *bool  `json:"serving"`
		Error      string `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("--json stdout %q: %v", out, err)
	}
	want := dir + " is not a pinfs mount"
	if code != exitFailed || st.Mountpoint != dir || st.Serving == nil || *st.Serving || st.Error != want ||
		errs != "pinfs status: "+want+"\n" {
		t.Errorf("--json: exit %d, status %+v, stderr %q", code, st, errs)
	}

	// --wait asks again, and still reports why at the end.
	code, _, errs = statusRun(t, dir, "--wait", "300ms", "--timeout", "1s")
	if code != exitFailed || errs != "pinfs status: "+want+"\n" {
		t.Errorf("--wait: exit %d, stderr %q", code, errs)
	}
}

func TestStatusOfMissingPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	code, out, errs := statusRun(t, dir)
	if code != exitFailed || out != "" || errs != "pinfs status: "+dir+" does not exist\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestStatusUsage: the digest form is as it was; bad durations are usage
// errors.
func TestStatusUsage(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sha256:00"}, `pinfs status: "sha256:00": ` + verify.ErrNotDigest.Error() + "; a digest prefix is not a name: pinfs list --store STORE lists the full digests"},
		{[]string{"sha256:" + strings.Repeat("0", 64), "--store", ""}, "pinfs status: --store is required (or set PINFS_STORE)"},
		{[]string{}, "pinfs status: want exactly one DIGEST or MOUNTPOINT, got 0 arguments"},
		{[]string{dir, "--timeout", "0s"}, "pinfs status: --timeout 0s: want a positive duration such as 5s"},
		{[]string{dir, "--wait", "-1s"}, "pinfs status: --wait -1s: want a duration such as 2m, or 0 to ask once"},
	} {
		code, out, errs := statusRun(t, c.args...)
		if code != exitUsage || out != "" || strings.TrimSpace(errs) != c.want {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2, %q", c.args, code, out, errs, c.want)
		}
	}
}
