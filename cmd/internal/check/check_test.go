package check

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/cmd/internal/pin"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// pinned pins a small directory into a local store under dir and returns
// the digest; big is larger than one Bao group, so it has an outboard.
func pinned(t *testing.T, dir string) (*localstore.Store, verify.Digest, map[string]string) {
	t.Helper()
	src := t.TempDir()
	files := map[string]string{"a": "alpha", "big": strings.Repeat("0123456789", 20_000)}
	for name, c := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st, err := localstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	d, err := (&pin.Pinner{Store: st}).Dir(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	return st, d, files
}

// blobPath returns the file of a store key.
func blobPath(dir, key string) string { return filepath.Join(dir, filepath.FromSlash(key)) }

func rewrite(t *testing.T, p string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRunPassesAndCounts(t *testing.T) {
	st, d, files := pinned(t, t.TempDir())
	for _, deep := range []bool{false, true} {
		r, err := Run(context.Background(), st, d, Options{Deep: deep})
		if err != nil || !r.OK || r.Members != 2 || r.Checked != 2 || r.Bytes != int64(len(files["a"])+len(files["big"])) {
			t.Fatalf("deep=%v: %+v, %v", deep, r, err)
		}
	}
}

func TestRunFindsEachProblem(t *testing.T) {
	flipMiddle := func(b []byte) []byte { b[len(b)/2] ^= 1; return b }
	for _, tc := range []struct {
		name   string
		deep   bool
		damage func(dir string, files map[string]string)
		kind   string
	}{
		{"missing blob", false, func(dir string, f map[string]string) {
			os.Remove(blobPath(dir, verify.CASKey(b3.Of([]byte(f["a"])).Hex())))
		}, verify.KindMissing},
		{"truncated blob", false, func(dir string, f map[string]string) {
			rewrite(t, blobPath(dir, verify.CASKey(b3.Of([]byte(f["a"])).Hex())), func(b []byte) []byte { return b[:1] })
		}, verify.KindSizeMismatch},
		{"bytes changed at rest (deep)", true, func(dir string, f map[string]string) {
			rewrite(t, blobPath(dir, verify.CASKey(b3.Of([]byte(f["big"])).Hex())), flipMiddle)
		}, verify.KindMismatch},
		{"outboard changed (deep)", true, func(dir string, f map[string]string) {
			rewrite(t, blobPath(dir, verify.OutboardKey(b3.Of([]byte(f["big"])).Hex())), flipMiddle)
		}, verify.KindMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			st, d, files := pinned(t, dir)
			tc.damage(dir, files)
			r, err := Run(context.Background(), st, d, Options{Deep: tc.deep})
			if err != nil || r.OK || r.Counts[tc.kind] != 1 || len(r.Problems) != 1 {
				t.Fatalf("report %+v, %v; want one %s", r, err, tc.kind)
			}
		})
	}
	// The shallow check does not read bytes: a same-size change passes it.
	dir := t.TempDir()
	st, d, files := pinned(t, dir)
	rewrite(t, blobPath(dir, verify.CASKey(b3.Of([]byte(files["big"])).Hex())), flipMiddle)
	if r, _ := Run(context.Background(), st, d, Options{}); !r.OK {
		t.Fatalf("shallow check read the bytes: %+v", r)
	}
}

func TestRunReportsATamperedManifest(t *testing.T) {
	dir := t.TempDir()
	st, d, _ := pinned(t, dir)
	rewrite(t, blobPath(dir, verify.ManifestKey(d)), func(b []byte) []byte {
		return []byte(strings.Replace(string(b), `"splitPolicy":"none"`, `"splitPolicy":"dir"`, 1))
	})
	r, err := Run(context.Background(), st, d, Options{})
	if err != nil || r.OK || !strings.Contains(r.Error, "invalid snapshot") {
		t.Fatalf("report %+v, %v", r, err)
	}
}
