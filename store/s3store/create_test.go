package s3store

import (
	"errors"
	"net/http"
	"testing"

	"github.com/pinfs/pinfs/store"
)

// TestBucketCreate: Create writes a new key once, and an existing key,
// whatever it holds, fails with ErrExist and is left as it was.
func TestBucketCreate(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("st", "Enabled")
	b := mustBucket(t, c, "st", "pinfs")
	if err := b.Create(ctx, "runs/r/run.json", []byte("first")); err != nil {
		t.Fatal(err)
	}
	for _, data := range []string{"first", "second"} {
		if err := b.Create(ctx, "runs/r/run.json", []byte(data)); !errors.Is(err, store.ErrExist) {
			t.Errorf("Create of an existing key with %q = %v; want ErrExist", data, err)
		}
	}
	if got, err := b.Get(ctx, "runs/r/run.json"); err != nil || string(got) != "first" {
		t.Errorf("Get = %q, %v", got, err)
	}
	for _, r := range f.requests() {
		if r.Method == http.MethodPut && r.Header.Get("If-None-Match") != "*" {
			t.Errorf("unconditional PUT %s", r.URL)
		}
	}
}

// TestBucketCreateNotExclusive: where the condition cannot be had, Create
// fails with ErrNotExclusive and sends no unconditional PUT: a server
// that answers NotImplemented to If-None-Match, and a current delete
// marker that the server counts as existing. A server that lets the
// conditional write through over a delete marker (AWS S3) is fine.
func TestBucketCreateNotExclusive(t *testing.T) {
	for _, tc := range []struct {
		name           string
		notImplemented bool
		marker         bool
		markerExists   bool
		ok             bool
	}{
		{name: "NotImplemented", notImplemented: true},
		{name: "delete marker counted as existing", marker: true, markerExists: true},
		{name: "delete marker counted as absent", marker: true, ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFake(t)
			f.markerExists = tc.markerExists
			f.createBucket("st", "Enabled")
			b := mustBucket(t, c, "st", "")
			if tc.marker {
				f.put("st", "k", []byte("old"))
				f.deleteKey("st", "k")
			}
			if tc.notImplemented {
				f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
					if r.Method == http.MethodPut && r.Header.Get("If-None-Match") != "" {
						writeErr(w, r, http.StatusNotImplemented, "NotImplemented")
						return true
					}
					return false
				})
			}
			n := len(f.requests())
			err := b.Create(ctx, "k", []byte("new"))
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				if got, err := b.Get(ctx, "k"); err != nil || string(got) != "new" {
					t.Fatalf("Get = %q, %v", got, err)
				}
				return
			}
			if !errors.Is(err, store.ErrNotExclusive) {
				t.Fatalf("Create = %v; want ErrNotExclusive", err)
			}
			for _, r := range f.requests()[n:] {
				if r.Method == http.MethodPut && r.Header.Get("If-None-Match") != "*" {
					t.Errorf("unconditional PUT %s", r.URL)
				}
			}
			if _, err := b.Get(ctx, "k"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("after a refused Create, Get = %v; want ErrNotFound", err)
			}
		})
	}
}
