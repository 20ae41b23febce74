package s3store

import (
	"testing"

	"github.com/pinfs/pinfs/store"
)

// A server that repeats the last entry of a page on the next page must not
// make a key appear twice; two current versions of one key are an error.
func TestDedupe(t *testing.T) {
	v := func(k, id string) store.ObjectVersion { return store.ObjectVersion{Key: k, VersionID: id} }
	got, err := dedupe("s3://b/p", []store.ObjectVersion{v("b", "2"), v("a", "1"), v("b", "2"), v("c", "3")})
	if err != nil || len(got) != 3 || got[0].Key != "a" || got[1].Key != "b" || got[2].Key != "c" {
		t.Fatalf("dedupe = %v, %v", got, err)
	}
	if _, err := dedupe("s3://b/p", []store.ObjectVersion{v("a", "1"), v("a", "2")}); err == nil {
		t.Fatal("two current versions of one key accepted")
	}
}
