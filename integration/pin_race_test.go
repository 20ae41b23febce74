package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfs/pinfs/integration/s3test"
	"github.com/pinfs/pinfs/verify/b3"
)

// TestPinDirReplacesBadCASBlob: a CAS blob of the right size but other
// bytes (a torn copy, or one a file changed under) must not be reused by a
// later clean pin of that content, in a local or an S3 store: the snapshot
// that pin makes verifies deep.
func TestPinDirReplacesBadCASBlob(t *testing.T) {
	t.Parallel()
	s := s3test.Start(t)
	env := s.Env()
	s.CreateBucket(t, "store", true)
	content := randomBytes(t, 300_000) // several Bao groups
	sum := b3.Of(content)
	bad := bytes.Clone(content)
	bad[150_000] ^= 1
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f.bin"), content, 0o644); err != nil {
		t.Fatal(err)
	}

	local := filepath.Join(t.TempDir(), "store")
	blob := filepath.Join(local, "cas", "blake3", sum.Hex())
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blob, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	s.Put(t, "store", "p/cas/blake3/"+sum.Hex(), bad)

	for name, st := range map[string]string{"local": local, "s3": "s3://store/p"} {
		t.Run(name, func(t *testing.T) {
			d := mustPinfs(t, env, "pin", src, "--store", st).lastLine()
			wantExit(t, env, 0, []string{"verify: OK"}, "verify", d, "--store", st, "--deep")
		})
	}
}
