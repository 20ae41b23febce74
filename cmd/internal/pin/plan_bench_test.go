package pin

import (
	"fmt"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/jcs"
)

// planOf100k is the plan of a 100,000-object listing in two shards.
func planOf100k(b *testing.B) []byte {
	vs := make([]store.ObjectVersion, 100_000)
	for i := range vs {
		vs[i] = store.ObjectVersion{Key: fmt.Sprintf("objs/d%03d/o%06d.bin", i/1000, i),
			VersionID: fmt.Sprintf("01JF%022d", i), Size: int64(2048 + i%6000), ETag: fmt.Sprintf(`"%032x"`, i)}
	}
	src, err := s3Source("scale", "objs/", vs)
	if err != nil {
		b.Fatal(err)
	}
	pl := &Plan{Schema: PlanSchema, Source: PlanSource{Bucket: "scale", Prefix: "objs/", URI: src.URI, Listing: src.Listing},
		Manifest: PlanManifest{Split: "none"}, Shards: balance(vs, 2)}
	out, err := jcs.Marshal(pl)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkParsePlan100k is what every shard and the merge pay to load
// the plan of a 100,000-object prefix.
func BenchmarkParsePlan100k(b *testing.B) {
	p := planOf100k(b)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		if _, err := ParsePlan(p); err != nil {
			b.Fatal(err)
		}
	}
}
