package verify_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfs/pinfs/verify"
)

// TestIndexInPlaceOfANonDirectory: a symbolic link or a file where the
// index goes is not an index (O_NOFOLLOW refuses the link): it is
// replaced by a real index, so that the next Fetch does not read the
// table again.
func TestIndexInPlaceOfANonDirectory(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"symlink", "file"} {
		x, m, _ := newIndexing(t, treeMembers())
		if err := os.MkdirAll(x.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(x.dir, indexDirName(m))
		var err error
		if kind == "symlink" {
			target := filepath.Join(x.dir, "elsewhere")
			if err = os.Mkdir(target, 0o700); err == nil {
				err = os.Symlink(target, p)
			}
		} else {
			err = os.WriteFile(p, []byte("not an index"), 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := verify.Fetch(context.Background(), x, m.SnapshotID); err != nil {
				t.Fatal(err)
			}
		}
		if x.opens != 1 {
			t.Errorf("%s in place of the index: the table was read %d times", kind, x.opens)
		}
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			t.Errorf("%s in place of the index: %v %v", kind, fi, err)
		}
		if _, err := os.Stat(filepath.Join(x.dir, "elsewhere")); kind == "symlink" && err != nil {
			t.Errorf("the link's target was removed: %v", err)
		}
	}
}
