package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
)

// TestSnapshotArgHints: a snapshot argument that is not a full digest is
// a usage error (exit 2) on every command that takes one, and its one line
// names what to do next: sha256: before a bare digest, pinfs resolve for
// what may be an alias (with the --store given), pinfs list for a prefix.
func TestSnapshotArgHints(t *testing.T) {
	t.Setenv("PINFS_STORE", "")
	hex := strings.Repeat("5e", 32)
	const s3 = "s3://my-bucket/pinfs"
	spaced := filepath.Join(t.TempDir(), "my store")
	resolve := "; if prod is an alias, resolve it first: pinfs resolve prod --store "
	for _, c := range []struct {
		args []string
		want string // the error after `pinfs CMD: "ARG": ` + ErrNotDigest
	}{
		{[]string{"mount", "prod", "/data/x", "--store", s3}, resolve + s3},
		{[]string{"ls", "prod", "--store", s3}, resolve + s3},
		{[]string{"verify", "prod"}, resolve + "STORE"},
		{[]string{"verify", "prod", "--store", spaced}, resolve + "'" + spaced + "'"},
		{[]string{"warm", "prod", "--store", s3}, resolve + s3},
		{[]string{"log", "prod", "--store", s3}, resolve + s3},
		{[]string{"diff", "prod", "sha256:" + hex, "--store", s3}, resolve + s3},
		{[]string{"alias", "set", "prod", "staging", "--store", s3}, "; if staging is an alias, resolve it first: pinfs resolve staging --store " + s3},
		{[]string{"pin", "s3://b/ds/", "--parent", "prod", "--store", s3}, resolve + s3},
		{[]string{"mount", hex, "/data/x", "--store", s3}, "; did you mean sha256:" + hex + "?"},
		{[]string{"verify", strings.ToUpper(hex), "--store", s3}, "; did you mean sha256:" + hex + "?"},
		{[]string{"ls", "SHA256:" + strings.ToUpper(hex), "--store", s3}, "; did you mean sha256:" + hex + "?"},
		{[]string{"approve", "sha256:" + hex, "--report", hex, "--key", "k", "--store", s3}, "; did you mean sha256:" + hex + "?"},
		{[]string{"ls", "sha256:5e1c", "--store", s3}, "; a digest prefix is not a name: pinfs list --store " + s3 + " lists the full digests"},
		{[]string{"status", "sha256:5e1c"}, "; a digest prefix is not a name: pinfs list --store STORE lists the full digests"},
		{[]string{"mount", "/data/x", "/data/y", "--store", s3}, ""}, // a path: no guess
		{[]string{"ls", "sha256:" + hex + "0", "--store", s3}, ""},
	} {
		code, out, errs := runPinfs(t, c.args...)
		name := c.args[0]
		if name == "alias" {
			name = "alias set"
		}
		arg := c.args[1]
		switch name {
		case "alias set":
			arg = c.args[3]
		case "pin":
			arg = c.args[3]
		case "approve":
			arg = c.args[3]
		}
		want := `pinfs ` + name + `: "` + arg + `": ` + verify.ErrNotDigest.Error() + c.want + "\n"
		if code != exitUsage || out != "" || errs != want {
			t.Errorf("pinfs %q: exit %d, stdout %q, stderr\n%q\nwant exit 2 and\n%q", c.args, code, out, errs, want)
		}
	}
}

// TestDeriveAndAdmitHints: pinfs derive --input and pinfs admit give the
// same hints for what is not a digest.
func TestDeriveAndAdmitHints(t *testing.T) {
	t.Setenv("PINFS_STORE", "")
	hex := strings.Repeat("5e", 32)
	const s3 = "s3://my-bucket/pinfs"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"derive", "--input", "raw=prod", "--transform", "t@v1", "--store", s3, "--", "true"},
			`pinfs derive: --input raw: "prod": ` + verify.ErrNotDigest.Error() + "; if prod is an alias, resolve it first: pinfs resolve prod --store " + s3},
		{[]string{"derive", "--input", "a=sha256:" + hex, "--input", "raw=" + hex, "--transform", "t@v1", "--store", s3, "--", "true"},
			`pinfs derive: --input raw: "` + hex + `": ` + verify.ErrNotDigest.Error() + "; did you mean sha256:" + hex + "?"},
		{[]string{"admit", hex, "--purpose", "p", "--run-record", "r", "--store", s3},
			`pinfs admit: "` + hex + `" is neither a gate name nor a sha256:<64 hex> digest; did you mean sha256:` + hex + "?"},
	} {
		code, out, errs := runPinfs(t, c.args...)
		if code != exitUsage || out != "" || errs != c.want+"\n" {
			t.Errorf("pinfs %q: exit %d, stdout %q, stderr\n%q\nwant exit 2 and\n%q", c.args, code, out, errs, c.want)
		}
	}
}

// TestUnknownDigestNamesList: a well-formed digest the store holds no
// manifest for fails with exit 1, naming pinfs list for that store.
func TestUnknownDigestNamesList(t *testing.T) {
	dir := t.TempDir()
	unknown := "sha256:" + strings.Repeat("0", 64)
	for _, args := range [][]string{
		{"ls", unknown, "--store", dir},
		{"verify", unknown, "--store", dir},
		{"status", unknown, "--store", dir},
		{"log", unknown, "--store", dir},
	} {
		code, out, errs := runPinfs(t, args...)
		msg := "no manifest " + unknown + " in store " + dir + "; pinfs list --store " + dir + " lists the manifests it holds"
		got := errs
		if want := "pinfs " + args[0] + ": " + msg + "\n"; args[0] == "verify" || args[0] == "log" {
			// pinfs verify and pinfs log print the missing manifest as a
			// FAIL line of their report.
			got = out
			if !strings.Contains(out, "FAIL") || !strings.Contains(out, msg+"\n") {
				t.Errorf("pinfs %q: stdout %q lacks a FAIL line ending %q", args, out, msg)
			}
		} else if errs != want {
			t.Errorf("pinfs %q: stderr %q, want %q", args, errs, want)
		}
		if code != exitFailed {
			t.Errorf("pinfs %q: exit %d, want 1: %s", args, code, got)
		}
	}
}

// TestStatusOfADigestNamedDirectory: pinfs status with a full digest that
// is also the name of a directory here reads the snapshot (as before), and
// says how to ask for the mount instead: ./sha256:…, as --help tells.
func TestStatusOfADigestNamedDirectory(t *testing.T) {
	t.Setenv("PINFS_STORE", "")
	store := t.TempDir()
	d := putSnapshot(t, store, nil)
	t.Chdir(t.TempDir())
	unknown := "sha256:" + strings.Repeat("ab", 32)
	for _, name := range []string{d.String(), unknown} {
		if err := os.Mkdir(name, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	hint := func(arg string) string {
		return arg + " is read as a snapshot digest; for the mount at the directory of that name run pinfs status ./" + arg
	}

	// No --store: a usage error, with the hint.
	code, out, errs := statusRun(t, unknown)
	if want := "pinfs status: --store is required (or set PINFS_STORE); " + hint(unknown) + "\n"; code != exitUsage || out != "" || errs != want {
		t.Errorf("no --store: exit %d, stdout %q, stderr %q; want exit 2 and %q", code, out, errs, want)
	}
	// A digest the store does not hold: exit 1, with the hint.
	code, _, errs = statusRun(t, unknown, "--store", store)
	if want := "; " + hint(unknown) + "\n"; code != exitFailed || !strings.HasPrefix(errs, "pinfs status: no manifest "+unknown) || !strings.HasSuffix(errs, want) {
		t.Errorf("unknown digest: exit %d, stderr %q; want exit 1 and a no manifest error ending %q", code, errs, want)
	}
	// A snapshot the store holds: its status, and the hint as a warning.
	code, out, errs = statusRun(t, d.String(), "--store", store)
	if code != exitOK || !strings.HasPrefix(out, d.String()+" BUILDING") || !strings.Contains(errs, "level=WARN") || !strings.Contains(errs, hint(d.String())) {
		t.Errorf("known digest: exit %d, stdout %q, stderr %q; want its status and a warning with the hint", code, out, errs)
	}
	// ./sha256:… is the mount's status (here: not a mount), no hint.
	code, _, errs = statusRun(t, "./"+d.String())
	if code != exitFailed || !strings.HasSuffix(errs, "/"+d.String()+" is not a pinfs mount\n") {
		t.Errorf("./digest: exit %d, stderr %q", code, errs)
	}
}

// TestStatusOfASnapshotNameThatIsNoPath: pinfs status takes any argument
// that is not a full digest for a MOUNTPOINT, so an alias or a bare
// digest (with --store, which only a snapshot needs) was answered "does
// not exist" alone. When no such path exists, the one line says what was
// probably meant, as on every other command; the exit status stays 1 (a
// probe of a missing path), and a plain missing mountpoint gets no guess.
func TestStatusOfASnapshotNameThatIsNoPath(t *testing.T) {
	t.Setenv("PINFS_STORE", "")
	store := t.TempDir()
	cwd := t.TempDir()
	t.Chdir(cwd)
	hex := strings.Repeat("5e", 32)
	for _, c := range []struct {
		args []string
		hint string
	}{
		{[]string{"prod", "--store", store}, "; if prod is an alias, resolve it first: pinfs resolve prod --store " + store},
		{[]string{hex, "--store", store}, "; did you mean sha256:" + hex + "?"},
		{[]string{hex}, "; did you mean sha256:" + hex + "?"},
		{[]string{"prod"}, ""}, // no --store: a mountpoint named prod
	} {
		code, out, errs := runPinfs(t, append([]string{"status"}, c.args...)...)
		want := "pinfs status: " + filepath.Join(cwd, c.args[0]) + " does not exist" + c.hint + "\n"
		if code != exitFailed || out != "" || errs != want {
			t.Errorf("pinfs status %q: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.args, code, out, errs, want)
		}
	}
}
