package pin

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/jcs"
)

// newPlanFake returns a fake S3 of n objects under p/ of pseudo-random
// sizes (up to max bytes), listed sorted by key.
func newPlanFake(t *testing.T, n, maxSize int, seed uint64) *fakeS3 {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	keys := map[string]string{}
	for i := range n {
		b := make([]byte, r.IntN(maxSize+1))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		keys[fmt.Sprintf("p/%s/k%05d", []string{"train", "val", "x"}[i%3], i)] = string(b)
	}
	f := newFakeS3(t, keys)
	slices.SortFunc(f.list, func(a, b store.ObjectVersion) int { return strings.Compare(a.Key, b.Key) })
	for i := range f.list {
		f.list[i].ETag = fmt.Sprintf(`"etag-%d"`, i)
	}
	return f
}

// planOf makes a plan of n shards of f's listing.
func planOf(t *testing.T, f *fakeS3, n int) (*Plan, []byte, verify.Digest) {
	t.Helper()
	p := &Pinner{Store: f, Lister: f, Options: Options{Split: mustSplit(t, "dir"), Purpose: "test"}}
	_, b, d, err := p.Plan(context.Background(), "b", "p", n)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := ParsePlan(b)
	if err != nil {
		t.Fatalf("parsing the plan Plan wrote: %v", err)
	}
	return pl, b, d
}

func mustSplit(t *testing.T, s string) SplitRule {
	t.Helper()
	r, err := ParseSplitRule(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPlanBalancesBytes(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 40} {
		f := newPlanFake(t, 200, 5000, uint64(n))
		pl, b, d := planOf(t, f, n)
		if pl.Len() != n || d != verify.SHA256(b) {
			t.Fatalf("%d shards: plan of %d shards, digest %s of bytes %s", n, pl.Len(), d, verify.SHA256(b))
		}
		var largest int64
		for _, v := range f.list {
			largest = max(largest, v.Size)
		}
		var union []store.ObjectVersion
		for i, a := range pl.Shards {
			for j, b := range pl.Shards {
				if a.Bytes-b.Bytes > largest {
					t.Errorf("%d shards: shard %d has %d bytes, shard %d %d: more apart than the largest object (%d)", n, i, a.Bytes, j, b.Bytes, largest)
				}
			}
			union = append(union, a.versions()...)
		}
		slices.SortFunc(union, func(a, b store.ObjectVersion) int { return strings.Compare(a.Key, b.Key) })
		if !slices.Equal(union, f.list) {
			t.Errorf("%d shards: the shards do not hold exactly the listing", n)
		}
		stored, err := f.Get(context.Background(), "plans/sha256/"+d.Hex())
		if err != nil || string(stored) != string(b) {
			t.Errorf("%d shards: plan not stored at its digest: %v", n, err)
		}
	}
}

func TestPlanIsDeterministicAndSummarised(t *testing.T) {
	f := newPlanFake(t, 50, 3000, 9)
	pl, _, d1 := planOf(t, f, 4)
	_, _, d2 := planOf(t, f, 4)
	if d1 != d2 {
		t.Fatalf("two plans of one listing: %s, %s", d1, d2)
	}
	var total, largest, smallest int64 = 0, 0, 1 << 62
	for _, s := range pl.Shards {
		total += s.Bytes
		largest, smallest = max(largest, s.Bytes), min(smallest, s.Bytes)
	}
	want := fmt.Sprintf("50 objects, %d bytes in 4 shards (largest %d, smallest %d bytes)", total, largest, smallest)
	if got := pl.Summary(); got != want {
		t.Errorf("Summary %q, want %q", got, want)
	}
}

func TestPlanTiesGoToTheLowerShard(t *testing.T) {
	f := newFakeS3(t, map[string]string{"p/a": "xx", "p/b": "xx", "p/c": "xx", "p/d": "y"})
	slices.SortFunc(f.list, func(a, b store.ObjectVersion) int { return strings.Compare(a.Key, b.Key) })
	pl, _, _ := planOf(t, f, 3)
	var got []string
	for _, s := range pl.Shards {
		var ks []string
		for _, o := range s.Objects {
			ks = append(ks, o.Key)
		}
		got = append(got, strings.Join(ks, ","))
	}
	if want := []string{"p/a,p/d", "p/b", "p/c"}; !slices.Equal(got, want) {
		t.Errorf("shards %q, want %q", got, want)
	}
}

func TestPlanKeepsEmptyShardsAndManifestFields(t *testing.T) {
	f := newFakeS3(t, map[string]string{"p/train/a": "a"})
	tw := int64(7)
	p := &Pinner{Store: f, Lister: f, Options: Options{Split: mustSplit(t, "dir:train"), Purpose: "it", TombstoneWatermark: &tw}}
	_, b, _, err := p.Plan(context.Background(), "b", "p/", 3)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := ParsePlan(b)
	if err != nil {
		t.Fatal(err)
	}
	if pl.Len() != 3 || len(pl.Shards[1].Objects) != 0 || len(pl.Shards[2].Objects) != 0 {
		t.Fatalf("plan of one object in 3 shards: %s", b)
	}
	o, err := pl.Options(Options{Jobs: 3})
	if err != nil {
		t.Fatal(err)
	}
	if o.Jobs != 3 || o.Purpose != "it" || o.Split.String() != "dir:train" || o.TombstoneWatermark == nil || *o.TombstoneWatermark != 7 || o.BenchmarkFence != nil {
		t.Errorf("Options of the plan: %+v", o)
	}
}

func TestPlanRefusesEmptyAndBadListings(t *testing.T) {
	f := newFakeS3(t, map[string]string{})
	p := &Pinner{Store: f, Lister: f}
	if _, _, _, err := p.Plan(context.Background(), "b", "p", 2); err == nil || !strings.Contains(err.Error(), "no objects") {
		t.Errorf("plan of an empty prefix: %v", err)
	}
	f = newFakeS3(t, map[string]string{"p/a": "a", "p/../x": "x"})
	if _, _, _, err := (&Pinner{Store: f, Lister: f}).Plan(context.Background(), "b", "p", 2); err == nil || !strings.Contains(err.Error(), "unsafe path") {
		t.Errorf("plan of a hostile key: %v", err)
	}

	// The --shards bound, against a listing that is otherwise valid: the
	// edges are planned, one past them refused by Plan itself.
	f = newFakeS3(t, map[string]string{"p/a": "a", "p/b": "bb"})
	for _, n := range []int{1, MaxShards} {
		if _, _, _, err := planShards(f, n); err != nil {
			t.Errorf("plan of %d shards: %v", n, err)
		}
	}
	for _, n := range []int{0, -1, MaxShards + 1} {
		want := fmt.Sprintf("plan of %d shards: want 1 to %d", n, MaxShards)
		if _, _, _, err := planShards(f, n); err == nil || err.Error() != want {
			t.Errorf("plan of %d shards: %v, want %q", n, err, want)
		}
	}
}

// planShards plans s3://b/p in n shards, turning a panic into an error.
func planShards(f *fakeS3, n int) (pl *Plan, b []byte, d verify.Digest, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return (&Pinner{Store: f, Lister: f}).Plan(context.Background(), "b", "p", n)
}

// reencode decodes a plan, changes it and encodes it canonically again.
func reencode(t *testing.T, b []byte, change func(pl *Plan)) []byte {
	t.Helper()
	var pl Plan
	if err := json.Unmarshal(b, &pl); err != nil {
		t.Fatal(err)
	}
	change(&pl)
	out, err := jcs.Marshal(&pl)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParsePlanRefusesEditedPlans(t *testing.T) {
	f := newPlanFake(t, 30, 2000, 3)
	_, b, _ := planOf(t, f, 3)
	move := func(pl *Plan) { // the first object of shard 0 to shard 1, bytes fixed
		o := pl.Shards[0].Objects[0]
		pl.Shards[0].Objects = pl.Shards[0].Objects[1:]
		pl.Shards[0].Bytes -= o.Size
		pl.Shards[1].Objects = append([]PlanObject{o}, pl.Shards[1].Objects...)
		pl.Shards[1].Bytes += o.Size
		slices.SortFunc(pl.Shards[1].Objects, func(a, b PlanObject) int { return strings.Compare(a.Key, b.Key) })
	}
	if _, err := ParsePlan(reencode(t, b, move)); err != nil {
		t.Fatalf("a plan with an object moved to another shard is still a plan: %v", err)
	}
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"version": {reencode(t, b, func(pl *Plan) { pl.Shards[2].Objects[0].VersionID = "other" }), "(edited?)"},
		"size": {reencode(t, b, func(pl *Plan) {
			pl.Shards[0].Objects[0].Size++
			pl.Shards[0].Bytes++
		}), "(edited?)"},
		"etag": {reencode(t, b, func(pl *Plan) { pl.Shards[0].Objects[0].ETag = `"x"` }), "(edited?)"},
		"dropped": {reencode(t, b, func(pl *Plan) {
			pl.Shards[1].Bytes -= pl.Shards[1].Objects[0].Size
			pl.Shards[1].Objects = pl.Shards[1].Objects[1:]
		}), "(edited?)"},
		"duplicate": {reencode(t, b, func(pl *Plan) {
			o := pl.Shards[0].Objects[0]
			pl.Shards[1].Objects = append(pl.Shards[1].Objects, o)
			pl.Shards[1].Bytes += o.Size
			slices.SortFunc(pl.Shards[1].Objects, func(a, b PlanObject) int { return strings.Compare(a.Key, b.Key) })
		}), "in shards 0 and 1"},
		"unsorted": {reencode(t, b, func(pl *Plan) {
			os := pl.Shards[2].Objects
			os[0], os[1] = os[1], os[0]
		}), "not sorted"},
		"bytes":         {reencode(t, b, func(pl *Plan) { pl.Shards[0].Bytes++ }), "add up"},
		"schema":        {reencode(t, b, func(pl *Plan) { pl.Schema = "pinfs.plan.v2" }), "schema"},
		"no shards":     {reencode(t, b, func(pl *Plan) { pl.Shards = nil }), "0 shards"},
		"uri":           {reencode(t, b, func(pl *Plan) { pl.Source.URI = "s3://b/q/" }), "uri"},
		"prefix":        {reencode(t, b, func(pl *Plan) { pl.Source.Prefix = "p"; pl.Source.URI = "s3://b/p" }), "prefix"},
		"outside":       {reencode(t, b, func(pl *Plan) { pl.Source.Prefix = "p/x/"; pl.Source.URI = "s3://b/p/x/" }), "not under"},
		"split":         {reencode(t, b, func(pl *Plan) { pl.Manifest.Split = "dir" }), "split"},
		"parent":        {reencode(t, b, func(pl *Plan) { pl.Manifest.Parents = []verify.Digest{"latest"} }), "parent"},
		"transform":     {reencode(t, b, func(pl *Plan) { pl.Manifest.Transform = "img:v1" }), "transform"},
		"unknown field": {[]byte(strings.Replace(string(b), `{"manifest":`, `{"extra":1,"manifest":`, 1)), "unknown field"},
		"not canonical": {[]byte(strings.Replace(string(b), `"schema":`, `"schema": `, 1)), "canonical"},
		"trailing":      {append(slices.Clone(b), []byte(" {}")...), "after the plan"},
		"not json":      {[]byte("shards: 3"), "not a pinfs plan"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePlan(tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParsePlan: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestLoadPlanByDigestAndByFile(t *testing.T) {
	ctx := context.Background()
	f := newPlanFake(t, 20, 1000, 5)
	_, b, d := planOf(t, f, 2)

	pl, got, err := LoadPlan(ctx, f, d.String())
	if err != nil || got != d || pl.Len() != 2 {
		t.Fatalf("LoadPlan(%s): %v, %s", d, err, got)
	}
	file := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if pl, got, err = LoadPlan(ctx, f, file); err != nil || got != d || pl.Len() != 2 {
		t.Fatalf("LoadPlan(%s): %v, %s", file, err, got)
	}

	// A store key that holds other bytes than its digest names is refused.
	other := reencode(t, b, func(pl *Plan) { pl.Manifest.Purpose = "other" })
	od := verify.SHA256(other)
	if err := f.Put(ctx, "plans/sha256/"+od.Hex(), b); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadPlan(ctx, f, od.String()); err == nil || !strings.Contains(err.Error(), "holds bytes of "+d.String()) {
		t.Errorf("LoadPlan of a key holding another plan: %v", err)
	}
	missing := verify.SHA256([]byte("no plan"))
	if _, _, err := LoadPlan(ctx, f, missing.String()); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("LoadPlan of a missing plan: %v", err)
	}
	// Anything but a full digest is a file.
	if _, _, err := LoadPlan(ctx, f, "sha256:abc"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("LoadPlan(sha256:abc): %v", err)
	}
	// A file with an edited plan is refused.
	if err := os.WriteFile(file, reencode(t, b, func(pl *Plan) { pl.Shards[0].Objects[0].VersionID = "v2" }), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadPlan(ctx, f, file); err == nil || !strings.Contains(err.Error(), "edited") {
		t.Errorf("LoadPlan of an edited file: %v", err)
	}
}
