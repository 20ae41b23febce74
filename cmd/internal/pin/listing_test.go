package pin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store"
)

// assertNothingWritten fails if the store under f holds a manifest or a
// member table.
func assertNothingWritten(t *testing.T, f *fakeS3) {
	t.Helper()
	for _, dir := range []string{"manifests", "members"} {
		if es, err := os.ReadDir(filepath.Join(f.Store.String(), dir)); len(es) > 0 || err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a refused pin left %d entries in %s/ (%v)", len(es), dir, err)
		}
	}
}

// TestS3PinRefusesAPrefixThatChangedWhileHashing: the prefix changes after
// the first listing, while the objects are hashed (the hook runs before
// the second listing, once every object was read). The pin fails naming
// every key that was added, deleted or given a new version, and writes
// neither a member table nor a manifest.
func TestS3PinRefusesAPrefixThatChangedWhileHashing(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(f *fakeS3)
		want   string
	}{
		"added": {func(f *fakeS3) {
			f.list = append(f.list, store.ObjectVersion{Key: "p/new", VersionID: "v9", Size: 1})
		}, "added p/new"},
		"deleted": {func(f *fakeS3) {
			f.list = slices.DeleteFunc(f.list, func(v store.ObjectVersion) bool { return v.Key == "p/b" })
		}, "deleted p/b"},
		"new version": {func(f *fakeS3) {
			for i := range f.list {
				if f.list[i].Key == "p/train/a" {
					f.list[i].VersionID = "v2"
				}
			}
		}, "new version of p/train/a"},
		"all three": {func(f *fakeS3) {
			f.list = []store.ObjectVersion{{Key: "p/train/a", VersionID: "v2", Size: 1}, {Key: "p/x", VersionID: "v3", Size: 1}}
		}, "added p/x, deleted p/b, new version of p/train/a"},
		"control character": {func(f *fakeS3) {
			f.list = append(f.list, store.ObjectVersion{Key: "p/x\n", VersionID: "v3", Size: 1})
		}, `added "p/x\n"`},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeS3(t, map[string]string{"p/train/a": "a", "p/b": "bb"})
			f.beforeList = func(n int) {
				if n != 2 {
					return
				}
				if len(f.reads) != 2 {
					t.Errorf("second listing after %d of 2 reads, want it after hashing", len(f.reads))
				}
				tc.change(f)
			}
			_, err := (&Pinner{Store: f, Lister: f}).S3(context.Background(), "b", "p")
			want := "s3://b/p/: changed while it was pinned: " + tc.want + "; pin again"
			if !errors.Is(err, ErrChanged) || err.Error() != want {
				t.Fatalf("pin of a changing prefix: %v\nwant %s", err, want)
			}
			if f.lists != 2 {
				t.Errorf("%d listings, want 2", f.lists)
			}
			assertNothingWritten(t, f)
		})
	}
}

// TestS3PinNamesAtMostTenChanges: a large change is named by its first
// ten keys and a count.
func TestS3PinNamesAtMostTenChanges(t *testing.T) {
	f := newFakeS3(t, map[string]string{"p/a": "a"})
	f.beforeList = func(n int) {
		for i := range 25 * (n - 1) {
			f.list = append(f.list, store.ObjectVersion{Key: fmt.Sprintf("p/n%02d", i), VersionID: "v", Size: 1})
		}
	}
	_, err := (&Pinner{Store: f, Lister: f}).S3(context.Background(), "b", "p/")
	if !errors.Is(err, ErrChanged) || !strings.HasSuffix(err.Error(), "added p/n09 and 15 more; pin again") ||
		strings.Contains(err.Error(), "p/n10") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("pin with 25 added keys: %v", err)
	}
	assertNothingWritten(t, f)
}

// TestS3PinListsTwice: an unchanged prefix is listed twice, after hashing,
// and pinned; a failing second listing fails the pin.
func TestS3PinListsTwice(t *testing.T) {
	f := newFakeS3(t, map[string]string{"p/a": "a", "p/b": "b"})
	p := &Pinner{Store: f, Lister: f}
	if _, err := p.S3(context.Background(), "b", "p/"); err != nil || f.lists != 2 {
		t.Fatalf("pin of a quiet prefix: %v after %d listings", err, f.lists)
	}

	g := newFakeS3(t, map[string]string{"p/a": "a"})
	g.beforeList = func(n int) {
		if n == 2 {
			g.list = nil
		}
	}
	// An emptied prefix is a change like any other, not "no objects".
	if _, err := (&Pinner{Store: g, Lister: g}).S3(context.Background(), "b", "p/"); !errors.Is(err, ErrChanged) ||
		!strings.Contains(err.Error(), "deleted p/a") {
		t.Fatalf("pin of a prefix emptied while hashing: %v", err)
	}
	assertNothingWritten(t, g)
}

// failingLister fails every listing after the first.
type failingLister struct{ *fakeS3 }

func (l failingLister) ListCurrent(ctx context.Context, bucket, prefix string) ([]store.ObjectVersion, error) {
	vs, _ := l.fakeS3.ListCurrent(ctx, bucket, prefix)
	if l.lists > 1 {
		return nil, store.ErrUnversioned
	}
	return vs, nil
}

func TestS3PinFailsWhenTheSecondListingFails(t *testing.T) {
	f := newFakeS3(t, map[string]string{"p/a": "a"})
	_, err := (&Pinner{Store: f, Lister: failingLister{f}}).S3(context.Background(), "b", "p/")
	if !errors.Is(err, store.ErrUnversioned) || !strings.Contains(err.Error(), "listing again after hashing") {
		t.Fatalf("pin whose second listing fails: %v", err)
	}
	assertNothingWritten(t, f)
}
