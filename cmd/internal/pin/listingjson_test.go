package pin

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/jcs"
)

// TestListingJSONIsJCS checks the fast path against jcs on strings with
// quotes, backslashes, non-ASCII, U+2028, DEL, and (through the fallback)
// control characters and invalid UTF-8.
func TestListingJSONIsJCS(t *testing.T) {
	odd := []string{"", "a", `"q"`, `back\slash`, "ünï/cödé", "line\u2028sep", "del\x7f", "<&>", "tab\there", "bad\xffutf8", "nul\x00", "日本/語"}
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		vs := make([]store.ObjectVersion, 1+r.IntN(4))
		for i := range vs {
			vs[i] = store.ObjectVersion{Key: odd[r.IntN(len(odd))] + "k", VersionID: odd[r.IntN(len(odd))],
				Size: r.Int64N(1 << 50), ETag: `"` + odd[r.IntN(len(odd))] + `"`}
		}
		want, err := jcs.Marshal(vs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := listingJSON(vs)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: listingJSON\n%s\njcs\n%s", round, got, want)
		}
	}
	if b, _ := listingJSON(nil); string(b) != "[]" {
		t.Fatalf("empty listing: %s", b)
	}
}

// TestPlanEncodeIsJCS checks Plan.encode against jcs on plans with odd
// strings, empty shards and optional manifest fields.
func TestPlanEncodeIsJCS(t *testing.T) {
	odd := []string{"a", `"q"`, `b\s`, "ü/ö", "x\u2028y", "tab\tx", "bad\xff"}
	r := rand.New(rand.NewPCG(3, 4))
	fence := int64(7)
	for round := range 100 {
		pl := &Plan{Schema: PlanSchema, Source: PlanSource{Bucket: "b", Prefix: "p/", URI: "s3://b/p/", Listing: "sha256:00"},
			Manifest: PlanManifest{Purpose: odd[r.IntN(len(odd))], Split: "none"}}
		if round%2 == 0 {
			pl.Manifest.BenchmarkFence = &fence
		}
		for range 1 + r.IntN(3) {
			var s PlanShard
			for range r.IntN(3) {
				o := PlanObject{Key: "p/" + odd[r.IntN(len(odd))], VersionID: odd[r.IntN(len(odd))], Size: r.Int64N(1 << 40), ETag: `"e"`}
				s.Objects = append(s.Objects, o)
				s.Bytes += o.Size
			}
			if s.Objects == nil && round%3 == 0 {
				s.Objects = []PlanObject{}
			}
			pl.Shards = append(pl.Shards, s)
		}
		if round%10 == 0 {
			pl.Shards = nil
		}
		want, err := jcs.Marshal(pl)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pl.encode()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: encode\n%s\njcs\n%s", round, got, want)
		}
	}
}
