package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
	"github.com/pinfs/pinfs/verify/jcs"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// tamperFile replaces the bytes of the local store file under dir/key.
func tamperFile(t testing.TB, dir, key string, b []byte) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(key))
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDiffAgainstFirstParent(t *testing.T) {
	fx := newFixture(t)
	p := fx.pin([]verify.Member{
		fx.cas("train/a", "train", "a"), fx.cas("train/b", "train", "b"), fx.cas("val/c", "val", "c"), fx.cas("x", "", "x"),
	}, nil)
	other := fx.pin([]verify.Member{fx.cas("z", "", "z")}, nil)
	d := fx.pin([]verify.Member{
		fx.cas("train/a", "train", "a"), // same
		fx.cas("train/b", "train", "B"), // changed
		fx.cas("val/c", "train", "c"),   // moved between splits at the same path
		fx.cas("y", "", "y"),            // added; x removed
	}, func(m *verify.Manifest) { m.Parents = []verify.Digest{p, other} })
	r := fx.validate(d, nil, Options{})
	if !r.OK {
		t.Fatalf("failures %+v", r.Failures)
	}
	want := &Diff{Parent: p, Added: 1, Removed: 1, Changed: 1, Moved: 1}
	if mt := r.Metrics; !reflect.DeepEqual(mt.Diff, want) || mt.Parents != 2 || mt.ParentsResolvable != 2 {
		t.Errorf("diff %+v, parents %d/%d; want %+v and 2/2", mt.Diff, mt.ParentsResolvable, mt.Parents, want)
	}
}

func TestOrphanIDs(t *testing.T) {
	fx := newFixture(t)
	d := fx.pin([]verify.Member{
		fx.s3("a", "", "ds/a", "a"),    // under the source
		fx.s3("b", "", "other/b", "b"), // outside every source
		fx.s3("c", "", "ds2/c", "c"),   // ds2/ is not under ds/
		fx.cas("d", "", "d"),           // CAS, but no dir: source
	}, func(m *verify.Manifest) { m.Sources = []verify.Source{{ID: "s3", URI: "s3://data/ds/"}} })
	r := fx.validate(d, nil, Options{})
	if !r.OK || r.Metrics.OrphanIDs != 3 || r.Metrics.Sources != 1 || r.Metrics.SourcesWithListing != 0 {
		t.Errorf("ok %v, orphans %d (want 3), sources %d/%d (want 0/1): %+v",
			r.OK, r.Metrics.OrphanIDs, r.Metrics.SourcesWithListing, r.Metrics.Sources, r.Failures)
	}

	// In an S3 store a directory's files are S3 members at the store's
	// cas/blake3/<hex> keys: covered by the dir: source.
	sum := b3.Of([]byte("e"))
	f := fx.s3("f", "", "pinfs/"+verify.CASKey(sum.Hex()), "f") // a CAS key of other bytes
	f.S3.VersionID = "v-f"
	fx.st.objects[store.Object{Bucket: "data", Key: f.S3.Key, VersionID: "v-f"}] = []byte("f")
	d = fx.pin([]verify.Member{
		fx.s3("e", "", "pinfs/"+verify.CASKey(sum.Hex()), "e"),
		f,
		fx.cas("g", "", "g"),
	}, nil)
	if r := fx.validate(d, nil, Options{}); !r.OK || r.Metrics.OrphanIDs != 1 {
		t.Errorf("ok %v, orphans %d, want 1: %+v", r.OK, r.Metrics.OrphanIDs, r.Failures)
	}
}

func TestReplayHash(t *testing.T) {
	fx := newFixture(t)
	x, y := fx.cas("p1", "train", "one"), fx.cas("p2", "val", "two")
	x.ID, y.ID = "x", "y"
	d1 := fx.pin([]verify.Member{x, y}, nil)
	// The same (id, digest) pairs at other paths, in the other table order.
	x.Path, y.Path, x.Split = "b", "a", ""
	d2 := fx.pin([]verify.Member{x, y}, nil)
	// One digest differs.
	z := fx.cas("b", "", "three")
	z.ID = "x"
	d3 := fx.pin([]verify.Member{z, y}, nil)

	h1 := fx.validate(d1, nil, Options{}).Metrics.ReplayHash
	if h := fx.validate(d1, nil, Options{}).Metrics.ReplayHash; h != h1 {
		t.Errorf("replay hash of one snapshot changed: %s then %s", h1, h)
	}
	if h := fx.validate(d2, nil, Options{}).Metrics.ReplayHash; h != h1 {
		t.Errorf("same pairs at other paths: %s, want %s", h, h1)
	}
	if h := fx.validate(d3, nil, Options{}).Metrics.ReplayHash; h == h1 {
		t.Errorf("another digest gives the same replay hash %s", h)
	}

	pairs := [][2]string{{"b", "blake3:2"}, {"a", "blake3:9"}, {"a", "blake3:1"}, {"q\"\n", "blake3:3"}}
	want := verify.SHA256([]byte(`[["a","blake3:1"],["a","blake3:9"],["b","blake3:2"],["q\"\n","blake3:3"]]`))
	for range 5 {
		if got := replayHash(pairTable(pairs)); got != want {
			t.Fatalf("replayHash(%q) = %s, want %s", pairs, got, want)
		}
		slices.Reverse(pairs)
		pairs[0], pairs[2] = pairs[2], pairs[0]
	}
}

// pairTable is a table whose members have pairs' ids and digests, in
// that order, at sorted paths of their own.
func pairTable(pairs [][2]string) *verify.Table {
	ms := make([]verify.Member, len(pairs))
	for i, p := range pairs {
		ms[i] = verify.Member{ID: p[0], Path: fmt.Sprintf("p%08d", i), Digest: p[1]}
	}
	return verify.NewTable(ms)
}

// replayHashOfPairs is replayHash as it was, over pairs of strings: the
// reference the index sort must agree with.
func replayHashOfPairs(pairs [][2]string) verify.Digest {
	slices.SortFunc(pairs, func(a, b [2]string) int {
		return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
	})
	buf := []byte{'['}
	for i, p := range pairs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(jcs.AppendString(append(jcs.AppendString(append(buf, '['), p[0]), ','), p[1]), ']')
	}
	return verify.SHA256(append(buf, ']'))
}

// TestReplayHashOfTableAsPairs: the replay hash of generated tables, with
// ids that are their paths, ids in another order with repeats, and
// repeated and malformed digests, is the one the pairs gave.
func TestReplayHashOfTableAsPairs(t *testing.T) {
	t.Parallel()
	for seed := range uint64(4) {
		ms := verifytest.Members(2000, verifytest.Kind(seed%2), seed)
		if seed >= 2 {
			for i := range ms {
				ms[i].ID = fmt.Sprintf("id-%d", (i*7919)%700) // out of path order, each id about three times
				if i%5 == 0 {
					ms[i].Digest = ms[(i+3)%len(ms)].Digest
				}
			}
			ms[7].Digest = "sha256:not-blake3"
		}
		pairs := make([][2]string, len(ms))
		for i, m := range ms {
			pairs[i] = [2]string{m.ID, m.Digest}
		}
		if got, want := replayHash(verify.NewTable(ms)), replayHashOfPairs(pairs); got != want {
			t.Fatalf("seed %d: replayHash of the table %s, of its pairs %s", seed, got, want)
		}
	}
}

func TestReportRoundTrip(t *testing.T) {
	fx := newFixture(t)
	d := fx.pin([]verify.Member{fx.cas("a", "", "a")}, func(m *verify.Manifest) { m.TombstoneWatermark = int64p(1) })
	r := fx.validate(d, &Fences{Gate: "g", Generation: 3, TombstoneWatermark: 2}, Options{})
	r.Metrics.BuildLatencySeconds = new(1.5)
	rd, err := Save(fx.ctx, fx.st, r)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := Save(fx.ctx, fx.st, r); err != nil || again != rd {
		t.Errorf("saving the same report again: %s, %v; first %s", again, err, rd)
	}
	got, err := LoadReport(fx.ctx, fx.st, rd)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("loaded %+v\nsaved  %+v", got, r)
	}
	if _, err := vouchingReport(fx.ctx, fx.st, d, rd, ""); err == nil || !errors.Is(err, ErrBadReport) || !strings.Contains(err.Error(), KindTombstoneWatermark) {
		t.Errorf("vouchingReport of a failing report: %v", err)
	}
	b, _ := fx.st.Get(fx.ctx, ReportKey(rd))

	for _, tc := range []struct {
		name    string
		content string
		own     bool // stored under its own digest (a forged report, not a changed one)
		want    string
	}{
		{"changed after saving", strings.Replace(string(b), `"ok":false`, `"ok":true `, 1), false, "content hashes to"},
		{"not canonical", " " + string(b), true, "canonical"},
		{"unknown field", strings.Replace(string(b), `{"deep"`, `{"approved":true,"deep"`, 1), true, "unknown field"},
		{"another schema", strings.Replace(string(b), ReportSchema, "pinfs.report.v0", 1), true, "schema"},
		{"v1 with hashing", strings.Replace(string(b), ReportSchema, reportSchemaV1, 1), true, "schema pinfs.report.v1 with hashing true"},
		{"ok with failures", strings.Replace(string(b), `"ok":false`, `"ok":true`, 1), true, "ok is true with 1 failures"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := ReportKey(rd)
			td := rd
			if tc.own {
				td = verify.SHA256([]byte(tc.content))
				key = ReportKey(td)
				fx.put(key, []byte(tc.content))
			} else {
				tamperFile(t, fx.st.String(), key, []byte(tc.content))
				t.Cleanup(func() { tamperFile(t, fx.st.String(), key, b) })
			}
			_, err := LoadReport(fx.ctx, fx.st, td)
			if !errors.Is(err, ErrBadReport) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadReport: %v, want ErrBadReport naming %q", err, tc.want)
			}
			if _, err := vouchingReport(fx.ctx, fx.st, d, td, ""); err == nil {
				t.Error("vouchingReport accepted it")
			}
		})
	}
}

func TestValidatedListsOnlyPassingReports(t *testing.T) {
	fx := newFixture(t)
	d := fx.pin([]verify.Member{fx.cas("a", "", "a")}, nil)
	other := fx.pin([]verify.Member{fx.cas("b", "", "b")}, nil)
	if ds, err := Validated(fx.ctx, fx.st, d); err != nil || len(ds) != 0 {
		t.Fatalf("before any validation: %v, %v", ds, err)
	}
	save := func(d verify.Digest, f *Fences, at string) verify.Digest {
		t.Helper()
		r := fx.validate(d, f, Options{})
		r.ValidatedAt = at
		rd, err := Save(fx.ctx, fx.st, r)
		if err != nil {
			t.Fatal(err)
		}
		return rd
	}
	older := save(d, nil, "2026-01-02T03:04:05Z")
	newer := save(d, nil, "2026-01-02T03:04:05.5Z")
	failed := save(d, &Fences{Gate: "g", Revoked: map[string]bool{"a": true}}, "2026-01-03T00:00:00Z")
	save(other, nil, "2026-01-04T00:00:00Z")
	ds, err := Validated(fx.ctx, fx.st, d)
	if err != nil || !slices.Equal(ds, []verify.Digest{newer, older}) {
		t.Fatalf("Validated = %v, %v; want [%s %s] (failing report %s)", ds, err, newer, older, failed)
	}
	for _, rd := range ds {
		if _, err := vouchingReport(fx.ctx, fx.st, d, rd, ""); err != nil {
			t.Errorf("vouchingReport(%s): %v", rd, err)
		}
		if _, err := vouchingReport(fx.ctx, fx.st, other, rd, ""); err == nil {
			t.Errorf("vouchingReport accepts report %s of %s for %s", rd, d, other)
		}
	}

	// A marker is no proof: one for a failing report, or for a report
	// changed after saving, is not listed.
	fx.put(ValidatedKey(d, failed), []byte(failed.String()+"\n"))
	b, _ := fx.st.Get(fx.ctx, ReportKey(older))
	tamperFile(t, fx.st.String(), ReportKey(older), []byte(strings.Replace(string(b), `"members":1`, `"members":2`, 1)))
	if ds, err := Validated(fx.ctx, fx.st, d); err != nil || !slices.Equal(ds, []verify.Digest{newer}) {
		t.Errorf("after forging markers: %v, %v; want [%s]", ds, err, newer)
	}

	if _, err := Validated(fx.ctx, blobsOnly{fx.st}, d); err == nil || !strings.Contains(err.Error(), "cannot list") {
		t.Errorf("a store without listings: %v", err)
	}
}

// blobsOnly hides everything of a store but Blobs.
type blobsOnly struct{ b store.Blobs }

func (s blobsOnly) Get(ctx context.Context, key string) ([]byte, error) { return s.b.Get(ctx, key) }
func (s blobsOnly) Put(ctx context.Context, key string, data []byte) error {
	return s.b.Put(ctx, key, data)
}
