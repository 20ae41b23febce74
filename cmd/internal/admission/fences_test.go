package admission

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store/gate"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

func TestLoadFences(t *testing.T) {
	fx := newFixture(t)
	list := func(entries ...string) gate.Fenced {
		t.Helper()
		d, n, err := gate.PutList(fx.ctx, fx.st, entries)
		if err != nil {
			t.Fatal(err)
		}
		return gate.Fenced{List: d, Count: n}
	}
	bDigest := b3.Of([]byte("b")).String()
	rec := &gate.Record{
		Schema: gate.Schema, Name: "support", Generation: 4, TombstoneWatermark: 2, BenchmarkFence: 1,
		Revocations: []gate.Fenced{list("a", bDigest), list("c")},
		Benchmarks:  []gate.Fenced{list("test/q")},
	}
	f, err := LoadFences(fx.ctx, fx.st, rec)
	if err != nil {
		t.Fatal(err)
	}
	if f.Gate != "support" || f.Generation != 4 || f.TombstoneWatermark != 2 || f.BenchmarkFence != 1 ||
		!slices.Equal(slices.Sorted(maps.Keys(f.Revoked)), []string{"a", bDigest, "c"}) ||
		!slices.Equal(slices.Sorted(maps.Keys(f.Benchmark)), []string{"test/q"}) {
		t.Fatalf("fences %+v", f)
	}

	// Applied: b by digest, test/q by id; the manifest is at the fences.
	d := fx.pin([]verify.Member{fx.cas("x/b", "", "b"), fx.cas("test/q", "test", "q"), fx.cas("ok", "", "ok")},
		func(m *verify.Manifest) { m.TombstoneWatermark, m.BenchmarkFence = int64p(2), int64p(1) })
	r := fx.validate(d, f, Options{})
	if got := kinds(r); !slices.Equal(got, []string{KindBenchmarkHit, KindTombstoneHit}) ||
		r.Metrics.TombstoneHits != 1 || r.Metrics.BenchmarkHits != 1 ||
		!slices.Equal(failure(r, KindTombstoneHit).Members, []string{"x/b"}) {
		t.Errorf("kinds %v, metrics %+v, failures %+v", got, r.Metrics, r.Failures)
	}

	// A list changed in the store is refused, naming it.
	tamperFile(t, fx.st.String(), gate.ListKey(rec.Revocations[1].List), []byte(`["d"]`))
	if _, err := LoadFences(fx.ctx, fx.st, rec); err == nil || !strings.Contains(err.Error(), rec.Revocations[1].List.String()) {
		t.Errorf("tampered list: %v", err)
	}
}
