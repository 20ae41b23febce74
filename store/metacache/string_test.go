package metacache

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/verify"
)

// The cache names its store, so that a missing manifest read through it
// names the store the user gave, not the cache directory.
func TestStringNamesTheStore(t *testing.T) {
	ls, err := localstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := New(t.TempDir(), ls)
	if c.String() != ls.String() {
		t.Errorf("String() = %q, want the store's %q", c.String(), ls.String())
	}
	d := verify.Digest("sha256:" + strings.Repeat("ab", 32))
	_, err = verify.Fetch(context.Background(), c, d)
	want := "no manifest " + string(d) + " in store " + ls.String() + "; pinfs list --store " + ls.String() + " lists the manifests it holds"
	if err == nil || err.Error() != want || !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Fetch of a missing manifest = %v; want %q wrapping store.ErrNotFound", err, want)
	}
	dir := t.TempDir()
	if got := New(dir, nil).String(); got != dir {
		t.Errorf("String() without a store = %q, want the cache dir %q", got, dir)
	}
}
