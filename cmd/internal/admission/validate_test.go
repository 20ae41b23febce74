package admission

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// fakeStore is a local store that also serves S3 member versions from
// memory, so that tests can pin S3 members and delete their versions.
type fakeStore struct {
	*localstore.Store
	objects map[store.Object][]byte
}

func (f *fakeStore) Stat(ctx context.Context, obj store.Object) (store.Info, error) {
	if obj.CAS != "" {
		return f.Store.Stat(ctx, obj)
	}
	b, ok := f.objects[obj]
	if !ok {
		return store.Info{}, fmt.Errorf("%v: %w", obj, store.ErrNotFound)
	}
	return store.Info{Size: int64(len(b))}, nil
}

func (f *fakeStore) ReadRange(ctx context.Context, obj store.Object, off, n int64) (io.ReadCloser, error) {
	if obj.CAS != "" {
		return f.Store.ReadRange(ctx, obj, off, n)
	}
	b, ok := f.objects[obj]
	if !ok {
		return nil, fmt.Errorf("%v: %w", obj, store.ErrNotFound)
	}
	return io.NopCloser(bytes.NewReader(b[off:])), nil
}

// fixture builds snapshots by hand in a fakeStore.
type fixture struct {
	t   testing.TB
	ctx context.Context
	st  *fakeStore
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ls, err := localstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: context.Background(), st: &fakeStore{Store: ls, objects: map[store.Object][]byte{}}}
}

// cas returns a member pinned from a directory, its bytes in the CAS area.
func (fx *fixture) cas(path, split, content string) verify.Member {
	fx.t.Helper()
	sum := b3.Of([]byte(content)).String()
	if _, err := fx.st.PutCAS(fx.ctx, sum, strings.NewReader(content), int64(len(content))); err != nil {
		fx.t.Fatal(err)
	}
	return verify.Member{ID: path, Path: path, Split: split, Size: int64(len(content)), Digest: sum, CAS: sum}
}

// s3 returns an S3 member s3://data/key at version "v-<key>".
func (fx *fixture) s3(path, split, key, content string) verify.Member {
	obj := store.Object{Bucket: "data", Key: key, VersionID: "v-" + key}
	fx.st.objects[obj] = []byte(content)
	return verify.Member{ID: path, Path: path, Split: split, Size: int64(len(content)), Digest: b3.Of([]byte(content)).String(),
		S3: &verify.S3Source{Bucket: obj.Bucket, Key: obj.Key, VersionID: obj.VersionID}}
}

// pin writes the member table of ms and a manifest naming it (with one
// dir: source, then edit applied) and returns its digest.
func (fx *fixture) pin(ms []verify.Member, edit func(*verify.Manifest)) verify.Digest {
	fx.t.Helper()
	ms = slices.Clone(ms)
	slices.SortFunc(ms, func(a, b verify.Member) int { return strings.Compare(a.Path, b.Path) })
	table, err := verify.EncodeMembers(ms)
	if err != nil {
		fx.t.Fatal(err)
	}
	var total int64
	for _, m := range ms {
		total += m.Size
	}
	m := &verify.Manifest{
		Sources: []verify.Source{{ID: "dir", URI: "dir:src", Listing: verify.SHA256([]byte("listing"))}},
		Purpose: "test",
		Members: verify.MembersRef{URI: verify.MembersURI(verify.SHA256(table)), Count: int64(len(ms)), Bytes: total},
	}
	if edit != nil {
		edit(m)
	}
	doc, err := verify.Build(m)
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.put(verify.MembersKey(verify.SHA256(table)), table)
	fx.put(verify.ManifestKey(m.SnapshotID), doc)
	return m.SnapshotID
}

func (fx *fixture) put(key string, b []byte) {
	fx.t.Helper()
	if err := fx.st.Put(fx.ctx, key, b); err != nil {
		fx.t.Fatal(err)
	}
}

func (fx *fixture) validate(d verify.Digest, f *Fences, o Options) *Report {
	fx.t.Helper()
	r, err := Validate(fx.ctx, fx.st, d, f, o)
	if err != nil {
		fx.t.Fatal(err)
	}
	if r.OK != (len(r.Failures) == 0) {
		fx.t.Fatalf("ok %v with failures %+v", r.OK, r.Failures)
	}
	return r
}

// kinds returns the failure kinds of r, sorted.
func kinds(r *Report) []string {
	var ks []string
	for _, f := range r.Failures {
		ks = append(ks, f.Kind)
	}
	slices.Sort(ks)
	return ks
}

func failure(r *Report, kind string) *Failure {
	for i := range r.Failures {
		if r.Failures[i].Kind == kind {
			return &r.Failures[i]
		}
	}
	return nil
}

func int64p(v int64) *int64 { return &v }

func TestValidatePasses(t *testing.T) {
	fx := newFixture(t)
	ms := []verify.Member{fx.cas("train/a", "train", "alpha"), fx.cas("val/b", "val", "beta"), fx.cas("README", "", "r")}
	d := fx.pin(ms, func(m *verify.Manifest) {
		m.Transform = "registry/harvest@sha256:" + strings.Repeat("ab", 32)
		m.TombstoneWatermark, m.BenchmarkFence = int64p(5), int64p(2)
	})
	fences := &Fences{Gate: "support", Generation: 7, TombstoneWatermark: 5, BenchmarkFence: 2,
		Revoked: map[string]bool{"train/other": true}, Benchmark: map[string]bool{b3.Of([]byte("nope")).String(): true}}
	for _, deep := range []bool{false, true} {
		r := fx.validate(d, fences, Options{Deep: deep})
		if !r.OK {
			t.Fatalf("deep %v: failures %+v", deep, r.Failures)
		}
		mt := r.Metrics
		if mt.Members != 3 || mt.Bytes != 10 || mt.VersionsChecked != 3 || mt.Sources != 1 || mt.SourcesWithListing != 1 ||
			mt.OrphanIDs != 0 || mt.Parents != 0 || mt.Diff != nil || mt.ReplayHash == "" {
			t.Errorf("deep %v: metrics %+v", deep, mt)
		}
		if r.Deep != deep || r.Manifest != d || r.Schema != ReportSchema || r.ValidatedAt == "" ||
			r.Gate == nil || *r.Gate != (GateRef{"support", 7, 5, 2}) {
			t.Errorf("deep %v: report %+v", deep, r)
		}
	}
	if r := fx.validate(d, nil, Options{}); !r.OK || r.Gate != nil {
		t.Errorf("without fences: %+v", r)
	}
}

func TestValidateHardFailures(t *testing.T) {
	zeros := "blake3:" + strings.Repeat("0", 64)
	for _, tc := range []struct {
		name   string
		build  func(fx *fixture) (verify.Digest, *Fences, Options)
		want   []string // failure kinds
		member string   // a member the first failure must name, or
		detail string   // text its detail must hold
	}{
		{"unversioned", func(fx *fixture) (verify.Digest, *Fences, Options) {
			m := fx.s3("train/a", "train", "ds/train/a", "alpha")
			m.S3.VersionID = "null"
			return fx.pin([]verify.Member{m}, nil), nil, Options{}
		}, []string{verify.KindUnversioned}, "train/a", ""},
		{"missing pinned version", func(fx *fixture) (verify.Digest, *Fences, Options) {
			m := fx.s3("train/a", "train", "ds/train/a", "alpha")
			delete(fx.st.objects, store.Object{Bucket: "data", Key: "ds/train/a", VersionID: "v-ds/train/a"})
			return fx.pin([]verify.Member{m, fx.s3("train/b", "train", "ds/train/b", "b")}, nil), nil, Options{}
		}, []string{verify.KindMissing}, "train/a", "is gone"},
		{"missing cas blob", func(fx *fixture) (verify.Digest, *Fences, Options) {
			m := verify.Member{ID: "x", Path: "x", Size: 3, Digest: b3.Of([]byte("xyz")).String()}
			m.CAS = m.Digest
			return fx.pin([]verify.Member{m}, nil), nil, Options{}
		}, []string{verify.KindMissing}, "x", ""},
		{"deep: other bytes at the pinned version", func(fx *fixture) (verify.Digest, *Fences, Options) {
			m := fx.s3("a", "", "ds/a", "alpha")
			fx.st.objects[store.Object{Bucket: "data", Key: "ds/a", VersionID: "v-ds/a"}] = []byte("ALPHA")
			return fx.pin([]verify.Member{m}, nil), nil, Options{Deep: true}
		}, []string{verify.KindMismatch}, "a", "hashes to"},
		{"duplicate ids", func(fx *fixture) (verify.Digest, *Fences, Options) {
			a, b := fx.cas("train/a", "train", "a"), fx.cas("train/b", "train", "b")
			b.ID = "train/a"
			return fx.pin([]verify.Member{a, b}, nil), nil, Options{}
		}, []string{verify.KindDuplicateID}, "train/a", ""},
		{"an id in two splits", func(fx *fixture) (verify.Digest, *Fences, Options) {
			a, b := fx.cas("train/a", "train", "a"), fx.cas("val/a", "val", "b")
			b.ID = "train/a"
			return fx.pin([]verify.Member{a, b}, nil), nil, Options{}
		}, []string{verify.KindDuplicateID, KindIDInTwoSplits}, "train/a", ""},
		{"tombstone hit by id", func(fx *fixture) (verify.Digest, *Fences, Options) {
			d := fx.pin([]verify.Member{fx.cas("a", "", "a"), fx.cas("b", "", "b")}, nil)
			return d, &Fences{Gate: "g", Revoked: map[string]bool{"b": true}}, Options{}
		}, []string{KindTombstoneHit}, "b", "revoked in gate g"},
		{"tombstone hit by digest", func(fx *fixture) (verify.Digest, *Fences, Options) {
			d := fx.pin([]verify.Member{fx.cas("a", "", "a"), fx.cas("b", "", "b")}, nil)
			return d, &Fences{Gate: "g", Revoked: map[string]bool{b3.Of([]byte("a")).String(): true}}, Options{}
		}, []string{KindTombstoneHit}, "a", ""},
		{"benchmark hit", func(fx *fixture) (verify.Digest, *Fences, Options) {
			d := fx.pin([]verify.Member{fx.cas("a", "", "a"), fx.cas("test/q", "test", "q")}, nil)
			return d, &Fences{Gate: "g", Benchmark: map[string]bool{"test/q": true}}, Options{}
		}, []string{KindBenchmarkHit}, "test/q", ""},
		{"built below the tombstone watermark", func(fx *fixture) (verify.Digest, *Fences, Options) {
			d := fx.pin([]verify.Member{fx.cas("a", "", "a")}, func(m *verify.Manifest) { m.TombstoneWatermark = int64p(3) })
			return d, &Fences{Gate: "g", TombstoneWatermark: 5}, Options{}
		}, []string{KindTombstoneWatermark}, "", "built at tombstone watermark 3, gate g is at 5: build a new manifest"},
		{"no tombstone watermark, gate has one", func(fx *fixture) (verify.Digest, *Fences, Options) {
			return fx.pin([]verify.Member{fx.cas("a", "", "a")}, nil), &Fences{Gate: "g", TombstoneWatermark: 1}, Options{}
		}, []string{KindTombstoneWatermark}, "", "built at tombstone watermark 0, gate g is at 1"},
		{"built below the benchmark fence", func(fx *fixture) (verify.Digest, *Fences, Options) {
			d := fx.pin([]verify.Member{fx.cas("a", "", "a")}, func(m *verify.Manifest) { m.BenchmarkFence = int64p(1) })
			return d, &Fences{Gate: "g", BenchmarkFence: 2}, Options{}
		}, []string{KindBenchmarkFence}, "", "built at benchmark fence 1, gate g is at 2"},
		{"unresolvable parent", func(fx *fixture) (verify.Digest, *Fences, Options) {
			gone := verify.SHA256([]byte("no such manifest"))
			return fx.pin([]verify.Member{fx.cas("a", "", "a")}, func(m *verify.Manifest) { m.Parents = []verify.Digest{gone} }), nil, Options{}
		}, []string{KindUnresolvableParent}, "", "parent sha256:"},
		{"parent with a tampered member table", func(fx *fixture) (verify.Digest, *Fences, Options) {
			p := fx.pin([]verify.Member{fx.cas("a", "", "a"), fx.cas("b", "", "b")}, nil)
			c, err := verify.Fetch(fx.ctx, fx.st, p)
			if err != nil {
				fx.t.Fatal(err)
			}
			td, _ := c.Manifest.Members.Digest()
			truncate(fx, verify.MembersKey(td))
			return fx.pin([]verify.Member{fx.cas("c", "", "c")}, func(m *verify.Manifest) { m.Parents = []verify.Digest{p} }), nil, Options{}
		}, []string{KindUnresolvableParent}, "", "member table"},
		{"transform given as a tag", func(fx *fixture) (verify.Digest, *Fences, Options) {
			return fx.pin([]verify.Member{fx.cas("a", "", "a")}, func(m *verify.Manifest) { m.Transform = "registry/harvest:v3" }), nil, Options{}
		}, []string{KindUnpinnedTransform}, "", "same tag, new digest cannot be detected"},
		{"truncated member table", func(fx *fixture) (verify.Digest, *Fences, Options) {
			d := fx.pin([]verify.Member{fx.cas("a", "", "a"), fx.cas("b", "", "b")}, nil)
			c, _ := verify.Fetch(fx.ctx, fx.st, d)
			td, _ := c.Manifest.Members.Digest()
			truncate(fx, verify.MembersKey(td))
			return d, nil, Options{}
		}, []string{KindInvalidSnapshot}, "", "member table"},
		{"no such manifest", func(fx *fixture) (verify.Digest, *Fences, Options) {
			return verify.SHA256([]byte("nothing")), nil, Options{}
		}, []string{KindInvalidSnapshot}, "", "no manifest " + verify.SHA256([]byte("nothing")).String() + " in store"},
		{"size 0 with another digest", func(fx *fixture) (verify.Digest, *Fences, Options) {
			return fx.pin([]verify.Member{{ID: "e", Path: "e", Size: 0, Digest: zeros, CAS: zeros}}, nil), nil, Options{}
		}, []string{verify.KindBadMember, verify.KindMissing}, "e", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			d, f, o := tc.build(fx)
			r := fx.validate(d, f, o)
			want := slices.Sorted(slices.Values(tc.want))
			if got := kinds(r); !slices.Equal(got, want) {
				t.Fatalf("failure kinds %v, want %v: %+v", got, want, r.Failures)
			}
			f0 := failure(r, tc.want[len(tc.want)-1])
			if tc.member != "" && (!slices.Contains(f0.Members, tc.member) || f0.Count < 1) {
				t.Errorf("%s names %v (count %d), want %q", f0.Kind, f0.Members, f0.Count, tc.member)
			}
			if !strings.Contains(f0.Detail, tc.detail) {
				t.Errorf("%s detail %q lacks %q", f0.Kind, f0.Detail, tc.detail)
			}
			if _, err := Save(fx.ctx, fx.st, r); err != nil {
				t.Fatal(err)
			}
			if ds, err := Validated(fx.ctx, fx.st, d); err != nil || len(ds) != 0 {
				t.Errorf("a failing report made %s validated: %v, %v", d, ds, err)
			}
		})
	}
}

// truncate drops the last line of the stored blob at key.
func truncate(fx *fixture, key string) {
	fx.t.Helper()
	b, err := fx.st.Get(fx.ctx, key)
	if err != nil {
		fx.t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	short := bytes.Join(lines[:len(lines)-2], nil)
	tamperFile(fx.t, fx.st.String(), key, short)
}
