package pin

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/store/versions"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// shardedFake is a fake S3 of 40 objects, some larger than a Bao group,
// and a plan of 3 shards of it.
func shardedFake(t *testing.T) (*fakeS3, *Plan, verify.Digest) {
	t.Helper()
	f := newPlanFake(t, 40, 3*b3.GroupSize, 11)
	pl, _, d := planOf(t, f, 3)
	return f, pl, d
}

// shardAll runs every shard of the plan with a fresh Pinner each, as
// separate processes would.
func shardAll(t *testing.T, f *fakeS3, pl *Plan, d verify.Digest, skip ...int) {
	t.Helper()
	for i := range pl.Len() {
		if slices.Contains(skip, i) {
			continue
		}
		p := &Pinner{Store: f, Lister: f, Options: Options{Jobs: 2}}
		if err := p.Shard(context.Background(), pl, d, i); err != nil {
			t.Fatalf("shard %d: %v", i, err)
		}
		if s := p.Stats(); s.Members != len(pl.Shards[i].Objects) {
			t.Errorf("shard %d: stats %v, want %d members", i, s, len(pl.Shards[i].Objects))
		}
	}
}

// merge merges the plan with a fresh Pinner.
func merge(f *fakeS3, pl *Plan, d verify.Digest) (verify.Digest, *Pinner, error) {
	p := &Pinner{Store: f, Lister: f}
	md, err := p.Merge(context.Background(), pl, d)
	return md, p, err
}

func TestShardsThenMergeEqualWholePin(t *testing.T) {
	f, pl, d := shardedFake(t)
	shardAll(t, f, pl, d)
	reads := len(f.reads)
	md, p, err := merge(f, pl, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.reads) != reads {
		t.Errorf("merge read %d members, want none", len(f.reads)-reads)
	}
	if s := p.Stats(); s.Members != 40 || s.Reused != 40 || s.Read != 0 || s.ReadBytes != 0 {
		t.Errorf("merge stats %v", s)
	}

	// A whole pin into a fresh store, with no cache to lean on.
	ls, err := localstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	whole := &fakeS3{Store: ls, objects: f.objects, list: f.list}
	wd, err := (&Pinner{Store: whole, Lister: whole, Options: Options{Split: mustSplit(t, "dir"), Purpose: "test"}}).S3(context.Background(), "b", "p/")
	if err != nil {
		t.Fatal(err)
	}
	if md != wd {
		t.Fatalf("merged pin %s, whole pin %s", md, wd)
	}
	snap, err := verify.Load(context.Background(), f, md)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(snap.Members()); n != 40 {
		t.Errorf("merged pin has %d members", n)
	}
	// The merge recorded every version in the digest cache.
	tab, err := versions.Open(f, "b", "p/").Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range snap.Members() {
		e, ok := tab.Lookup(m.S3.Key, m.S3.VersionID)
		if !ok || e.Digest.String() != m.Digest || e.Size != m.Size {
			t.Errorf("digest cache after merge: %s: %+v, %v; member %s", m.S3.Key, e, ok, m.Digest)
		}
	}
	// Merging again gives the same digest.
	if md2, _, err := merge(f, pl, d); err != nil || md2 != md {
		t.Errorf("second merge: %s, %v; first %s", md2, err, md)
	}
}

func TestShardRerunKeepsOrReplacesItsPartial(t *testing.T) {
	ctx := context.Background()
	f, pl, d := shardedFake(t)
	shardAll(t, f, pl, d)
	key := "shards/sha256/" + d.Hex() + "/1"
	first, err := f.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	shardAll(t, f, pl, d)
	if again, _ := f.Get(ctx, key); string(again) != string(first) {
		t.Errorf("rerun of shard 1 changed its partial table")
	}
	// A bad partial is refused by merge, then replaced by a rerun.
	_, rev, err := f.Load(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Swap(ctx, key, []byte("garbage"), rev); err != nil {
		t.Fatal(err)
	}
	if _, _, err := merge(f, pl, d); err == nil || !strings.Contains(err.Error(), "shard 1: partial table") {
		t.Fatalf("merge with a garbage partial: %v", err)
	}
	shardAll(t, f, pl, d, 0, 2)
	if again, _ := f.Get(ctx, key); string(again) != string(first) {
		t.Errorf("rerun of shard 1 did not replace a bad partial table")
	}
	if _, _, err := merge(f, pl, d); err != nil {
		t.Errorf("merge after the rerun: %v", err)
	}
}

func TestMergeRefusesMissingAndExtraShards(t *testing.T) {
	ctx := context.Background()
	f := newPlanFake(t, 40, 1000, 12)
	pl, _, d := planOf(t, f, 4)
	shardAll(t, f, pl, d, 1, 3)
	want := "missing shards 1, 3 of 4: run pinfs pin --plan " + d.String() + " --shard 1"
	if _, _, err := merge(f, pl, d); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("merge without shards 1 and 3: %v, want %q", err, want)
	}
	shardAll(t, f, pl, d, 0, 1, 2)
	if _, _, err := merge(f, pl, d); err == nil || !strings.Contains(err.Error(), "missing shard 1 of 4") {
		t.Fatalf("merge without shard 1: %v", err)
	}
	shardAll(t, f, pl, d, 0, 2, 3)
	for _, stray := range []string{"4", "01"} {
		if err := f.Put(ctx, "shards/sha256/"+d.Hex()+"/"+stray, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	want = "extra shards 01, 4: plan " + d.String() + " has 4 shards"
	if _, _, err := merge(f, pl, d); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("merge with stray shards: %v, want %q", err, want)
	}
}

// swapPartial rewrites shard i's partial table with the entries change
// returns.
func swapPartial(t *testing.T, f *fakeS3, d verify.Digest, i int, change func([]versions.Entry) []versions.Entry) {
	t.Helper()
	ctx := context.Background()
	key := shardKey(d, i)
	b, rev, err := f.Load(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	bucket, es, err := versions.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := versions.Encode(bucket, change(es))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Swap(ctx, key, nb, rev); err != nil {
		t.Fatal(err)
	}
}

func TestMergeRefusesPartialsThatDoNotCoverTheirShard(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(es []versions.Entry) []versions.Entry
		want   string
	}{
		"extra object": {func(es []versions.Entry) []versions.Entry {
			return append(es, versions.Entry{Key: "p/zzz", VersionID: "v", Size: 1})
		}, "shard 0: partial table does not cover the plan's shard: names p/zzz, which is not in the shard"},
		"lacks object": {func(es []versions.Entry) []versions.Entry { return es[1:] }, "shard 0: partial table does not cover the plan's shard: lacks "},
		"version": {func(es []versions.Entry) []versions.Entry {
			es[0].VersionID = "other"
			return es
		}, "at version other"},
		"size": {func(es []versions.Entry) []versions.Entry {
			es[0].Size++
			return es
		}, "bytes, the plan's has"},
	} {
		t.Run(name, func(t *testing.T) {
			f, pl, d := shardedFake(t)
			shardAll(t, f, pl, d)
			swapPartial(t, f, d, 0, tc.change)
			if _, _, err := merge(f, pl, d); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("merge: %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("another shard's table", func(t *testing.T) {
		f, pl, d := shardedFake(t)
		shardAll(t, f, pl, d)
		other, err := f.Get(context.Background(), shardKey(d, 2))
		if err != nil {
			t.Fatal(err)
		}
		swapPartial(t, f, d, 0, func([]versions.Entry) []versions.Entry {
			_, es, _ := versions.Parse(other)
			return es
		})
		if _, _, err := merge(f, pl, d); err == nil || !strings.Contains(err.Error(), "shard 0: partial table does not cover") {
			t.Fatalf("merge with shard 2's table as shard 0's: %v", err)
		}
	})
}

func TestMergeRefusesAChangedPrefix(t *testing.T) {
	f, pl, d := shardedFake(t)
	shardAll(t, f, pl, d)
	f.list = append(f.list, store.ObjectVersion{Key: "p/zz-new", VersionID: "v1", Size: 1})
	_, _, err := merge(f, pl, d)
	if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "added p/zz-new") {
		t.Fatalf("merge after a key was added: %v", err)
	}
}

func TestShardRefusesAnIndexOutsideThePlan(t *testing.T) {
	f, pl, d := shardedFake(t)
	for _, i := range []int{-1, 3} {
		if err := (&Pinner{Store: f, Lister: f}).Shard(context.Background(), pl, d, i); err == nil || !strings.Contains(err.Error(), "shards 0 to 2") {
			t.Errorf("shard %d: %v", i, err)
		}
	}
}
