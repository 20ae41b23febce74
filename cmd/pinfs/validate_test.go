package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store/gate"
	"github.com/pinfs/pinfs/store/localstore"
)

// TestValidateAppliesTheGatesFences: with --alias the gate's tombstone
// watermark and revocation list apply; a manifest built at the watermark
// without the revoked member passes.
func TestValidateAppliesTheGatesFences(t *testing.T) {
	ctx := context.Background()
	pinDir := func(st string, files map[string]string, flags ...string) string {
		t.Helper()
		return pinFiles(t, st, files, flags...)
	}
	validate := func(want int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(ctx, append([]string{"validate"}, args...), &out, &errOut); code != want {
			t.Fatalf("validate %v: exit %d, want %d\n%s%s", args, code, want, out.String(), errOut.String())
		}
		return out.String()
	}

	st := t.TempDir()
	d1 := pinDir(st, map[string]string{"train/a": "alpha", "val/b": "beta"})
	ls, err := localstore.New(st)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.Open(ls, "support")
	if err != nil {
		t.Fatal(err)
	}
	list, n, err := gate.PutList(ctx, ls, []string{"train/a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Update(ctx, false, func(*gate.Record) (*gate.Record, error) {
		return &gate.Record{Op: gate.OpFence, TombstoneWatermark: 2, Revocations: []gate.Fenced{{At: 2, List: list, Count: n}}}, nil
	}); err != nil {
		t.Fatal(err)
	}

	validate(exitOK, d1, "--store", st) // no gate: no fences
	out := validate(exitFailed, d1, "--store", st, "--alias", "support")
	for _, w := range []string{"gate support generation 1: tombstone watermark 2, benchmark fence 0", "tombstone hits 1", "not VALIDATED: 2 hard failures"} {
		if !strings.Contains(out, w) {
			t.Errorf("validate --alias support lacks %q:\n%s", w, out)
		}
	}
	d2 := pinDir(st, map[string]string{"val/b": "beta"}, "--tombstone-watermark", "2")
	out = validate(exitOK, d2, "--store", st, "--alias", "support")
	if !strings.Contains(out, "state VALIDATED") || !strings.Contains(out, "gate support generation 1") {
		t.Errorf("validate of a manifest at the gate's fences:\n%s", out)
	}
	validate(exitUsage, "sha256:abc", "--store", st)
}

// pinFiles pins a directory holding files (path: content) into the local
// store at st with pinfs pin and flags, and returns the manifest digest.
func pinFiles(t testing.TB, st string, files map[string]string, flags ...string) string {
	t.Helper()
	src := t.TempDir()
	for p, c := range files {
		full := filepath.Join(src, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut bytes.Buffer
	if code := run(t.Context(), append([]string{"pin", src, "--store", st}, flags...), &out, &errOut); code != exitOK {
		t.Fatalf("pin: exit %d: %s", code, errOut.String())
	}
	return strings.TrimSpace(out.String())
}

// TestValidateAndApproveLabelTheirDigests: the digest that validate and
// approve print last is labelled (report, envelope), so that it is not
// taken for the manifest digest; pin's last line stays the bare digest.
func TestValidateAndApproveLabelTheirDigests(t *testing.T) {
	st := t.TempDir()
	d := pinFiles(t, st, map[string]string{"train/a": "alpha"})
	runOK := func(args ...string) []string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(t.Context(), args, &out, &errOut); code != exitOK {
			t.Fatalf("pinfs %v: exit %d: %s", args, code, errOut.String())
		}
		return strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	}
	isDigest := func(s string) bool { return strings.HasPrefix(s, "sha256:") && len(s) == len("sha256:")+64 }
	if !isDigest(d) {
		t.Fatalf("pin's last line %q is not the bare manifest digest", d)
	}
	lines := runOK("validate", d, "--store", st)
	rd, ok := strings.CutPrefix(lines[len(lines)-1], "report ")
	if !ok || !isDigest(rd) || rd == d {
		t.Errorf("validate's last line %q; want report sha256:<report digest>", lines[len(lines)-1])
	}
	prefix := filepath.Join(t.TempDir(), "alice")
	runOK("key", "generate", prefix)
	lines = runOK("approve", d, "--store", st, "--key", prefix+".key")
	env, ok := strings.CutPrefix(lines[len(lines)-1], "  envelope ")
	if !ok || !isDigest(env) || env == d {
		t.Errorf("approve's last line %q; want   envelope sha256:<envelope digest>:\n%s", lines[len(lines)-1], strings.Join(lines, "\n"))
	}
	if _, err := os.Stat(filepath.Join(st, "admission", "sha256", strings.TrimPrefix(d, "sha256:"), "approvals", strings.TrimPrefix(env, "sha256:"))); err != nil {
		t.Errorf("the envelope approve printed is not the one it stored: %v", err)
	}
}
