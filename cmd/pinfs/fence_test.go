package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store/gate"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// runPinfs runs one pinfs command line in-process and returns its exit
// code and output.
func runPinfs(t testing.TB, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestFenceRefusesNonCanonicalDigest: a --revoke file with a digest not
// written blake3:<64 lower-case hex> is refused with exit 2 and one line
// naming the file and the line, and nothing is written to the store.
func TestFenceRefusesNonCanonicalDigest(t *testing.T) {
	st := t.TempDir()
	digest := b3.Of([]byte("secret")).String()
	file := filepath.Join(t.TempDir(), "revoked.txt")
	if err := os.WriteFile(file, []byte("# gdpr\ntrain/a\n"+strings.ToUpper(digest)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runPinfs(t, "fence", "support", "--tombstone", "1", "--revoke", file, "--store", st)
	if code != exitUsage || !strings.Contains(errOut, file+":3: ") || !strings.Contains(errOut, "blake3:<64 lower-case hex>") ||
		strings.Count(errOut, "\n") != 1 {
		t.Fatalf("fence with an upper-case digest: exit %d, %q; want exit 2 naming %s:3", code, errOut, file)
	}
	if entries, err := os.ReadDir(st); err != nil || len(entries) != 0 {
		t.Errorf("a refused fence wrote to the store: %v, %v", entries, err)
	}
	// The same digest in lower case is taken.
	if err := os.WriteFile(file, []byte("train/a\n"+digest+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runPinfs(t, "fence", "support", "--tombstone", "1", "--revoke", file, "--store", st); code != exitOK {
		t.Fatalf("fence: exit %d: %s", code, errOut)
	}
}

// TestValidateRefusesNonCanonicalStoredList: a revocation list in the
// store whose digest entry is not canonical would never match a member;
// it is a store claim, refused with exit 1 naming the list.
func TestValidateRefusesNonCanonicalStoredList(t *testing.T) {
	ctx := t.Context()
	st := t.TempDir()
	d := pinFiles(t, st, map[string]string{"train/a": "alpha"}, "--tombstone-watermark", "2")
	ls, err := localstore.New(st)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(`["` + strings.ToUpper(b3.Of([]byte("alpha")).String()) + `"]`)
	list := verify.SHA256(data)
	if err := ls.Put(ctx, gate.ListKey(list), data); err != nil {
		t.Fatal(err)
	}
	g, err := gate.Open(ls, "support")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Update(ctx, false, func(*gate.Record) (*gate.Record, error) {
		return &gate.Record{Op: gate.OpFence, TombstoneWatermark: 2, Revocations: []gate.Fenced{{At: 2, List: list, Count: 1}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runPinfs(t, "validate", d, "--store", st, "--alias", "support")
	if code != exitFailed || !strings.Contains(errOut, list.String()) || !strings.Contains(errOut, "blake3:<64 lower-case hex>") ||
		strings.Contains(out, "VALIDATED") {
		t.Fatalf("validate with a non-canonical stored list: exit %d\n%s%s", code, out, errOut)
	}
}
