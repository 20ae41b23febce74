package s3store

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/storetest"
)

// TestBucketSwap: Load returns the ETag, Swap writes only at the revision
// read (If-Match) or, with "", only a new key (If-None-Match: *), and every
// PUT it sends carries the condition.
func TestBucketSwap(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("st", "Enabled")
	b := mustBucket(t, c, "st", "pinfs")
	storetest.TestSwapper(t, b)
	storetest.RaceSwap(t, b, 8, 3)
	for _, r := range f.requests() {
		if r.Method != http.MethodPut {
			continue
		}
		if r.Header.Get("If-None-Match") != "*" && r.Header.Get("If-Match") == "" {
			t.Errorf("unconditional PUT %s", r.URL)
		}
		if !strings.HasPrefix(r.URL.Path, "/st/pinfs/storetest/") {
			t.Errorf("PUT outside the store: %s", r.URL)
		}
	}
}

// TestBucketSwapAnswerLost: when the server wrote the first attempt and
// refuses the SDK's retry of it with 412, Swap reads the key, finds its
// own bytes and succeeds; other bytes there are a conflict.
func TestBucketSwapAnswerLost(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("st", "Enabled")
	b := mustBucket(t, c, "st", "")
	f.put("st", "k", []byte("mine"))
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPut {
			writeErr(w, r, http.StatusPreconditionFailed, "PreconditionFailed")
			return true
		}
		return false
	})
	if err := b.Swap(ctx, "k", []byte("mine"), `"whatever"`); err != nil {
		t.Errorf("Swap whose bytes are in place = %v; want success", err)
	}
	if err := b.Swap(ctx, "k", []byte("other"), `"whatever"`); !errors.Is(err, store.ErrConflict) {
		t.Errorf("Swap = %v; want ErrConflict", err)
	}
}

// TestBucketSwapNotExclusive: a server that answers NotImplemented to the
// condition, and a create over a delete marker the server counts as
// existing, fail with ErrNotExclusive and no unconditional PUT follows.
func TestBucketSwapNotExclusive(t *testing.T) {
	for _, tc := range []struct {
		name           string
		notImplemented bool
		marker         bool
		rev            string
		want           string
	}{
		{name: "NotImplemented If-Match", notImplemented: true, rev: `"abc"`, want: "does not support conditional writes (If-Match): the gate needs them"},
		{name: "NotImplemented If-None-Match", notImplemented: true, want: "does not support conditional writes (If-None-Match)"},
		{name: "delete marker counted as existing", marker: true, want: "delete marker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFake(t)
			f.markerExists = true
			f.createBucket("st", "Enabled")
			b := mustBucket(t, c, "st", "")
			f.put("st", "k", []byte("old"))
			if tc.marker {
				f.deleteKey("st", "k")
			}
			if tc.notImplemented {
				f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
					if r.Method == http.MethodPut && (r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Match") != "") {
						writeErr(w, r, http.StatusNotImplemented, "NotImplemented")
						return true
					}
					return false
				})
			}
			n := len(f.requests())
			err := b.Swap(ctx, "k", []byte("new"), tc.rev)
			if !errors.Is(err, store.ErrNotExclusive) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Swap = %v; want ErrNotExclusive saying %q", err, tc.want)
			}
			for _, r := range f.requests()[n:] {
				if r.Method == http.MethodPut && r.Header.Get("If-None-Match") == "" && r.Header.Get("If-Match") == "" {
					t.Errorf("unconditional PUT %s", r.URL)
				}
			}
		})
	}
}

// TestBucketList: keys under the prefix relative to the store root, over
// several pages, without deleted keys, directory markers and keys outside
// the store's prefix.
func TestBucketList(t *testing.T) {
	f, c := newFake(t)
	f.pageSize = 2
	f.createBucket("st", "Enabled")
	b := mustBucket(t, c, "st", "pinfs")
	var want []string
	for i := range 5 {
		k := fmt.Sprintf("gates/g%d/head", i)
		f.put("st", "pinfs/"+k, []byte("x"))
		want = append(want, k)
	}
	f.put("st", "pinfs/gates/dir/", nil)
	f.put("st", "pinfs/gates/gone/head", []byte("x"))
	f.deleteKey("st", "pinfs/gates/gone/head")
	f.put("st", "pinfs/manifests/sha256/00", []byte("x"))
	f.put("st", "other/gates/g9/head", []byte("x"))
	got, err := b.List(ctx, "gates/")
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("List(gates/) = %q, %v; want %q", got, err, want)
	}
	if got, err := b.List(ctx, "gates/g1"); err != nil || !slices.Equal(got, []string{"gates/g1/head"}) {
		t.Errorf("List(gates/g1) = %q, %v", got, err)
	}
	if got, err := b.List(ctx, "nothing/"); err != nil || len(got) != 0 {
		t.Errorf("List(nothing/) = %q, %v", got, err)
	}
	if _, err := b.List(ctx, "../x/"); err == nil {
		t.Error("List(../x/) succeeded")
	}
	root := mustBucket(t, c, "st", "")
	if got, err := root.List(ctx, "other/"); err != nil || !slices.Equal(got, []string{"other/gates/g9/head"}) {
		t.Errorf("List(other/) at the bucket root = %q, %v", got, err)
	}
}
