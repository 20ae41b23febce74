package lineage

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

func member(path, split, content string) verify.Member {
	d := b3.Of([]byte(content)).String()
	return verify.Member{ID: path, Path: path, Split: split, Size: int64(len(content)), Digest: d, CAS: d}
}

func paths(cs []Change) string {
	var s []string
	for _, c := range cs {
		s = append(s, c.Path)
	}
	return strings.Join(s, ",")
}

func TestCompare(t *testing.T) {
	a := []verify.Member{
		member("keep", "", "k"),
		member("train/gone", "train", "g"),
		member("train/moved", "train", "m"),
		member("x", "train", "x"),
		member("y", "", "old"),
	}
	b := []verify.Member{
		member("keep", "", "k"),
		member("new", "", "n"),
		member("val/moved", "val", "m"),
		member("x", "val", "x"),
		member("y", "", "new"),
	}
	d := Compare("A", "B", verify.NewTable(a), verify.NewTable(b))
	for name, got := range map[string][2]string{
		"added":   {paths(d.Added), "new"},
		"removed": {paths(d.Removed), "train/gone"},
		"changed": {paths(d.Changed), "y"},
		"moved":   {paths(d.Moved), "val/moved,x"},
	} {
		if got[0] != got[1] {
			t.Errorf("%s = %q, want %q", name, got[0], got[1])
		}
	}
	if d.Counts["added"] != 1 || d.Counts["removed"] != 1 || d.Counts["changed"] != 1 || d.Counts["moved"] != 2 {
		t.Errorf("counts %v", d.Counts)
	}
	if same := Compare("A", "A", verify.NewTable(a), verify.NewTable(a)); len(same.Added)+len(same.Removed)+len(same.Changed)+len(same.Moved) != 0 {
		t.Errorf("a snapshot differs from itself: %+v", same)
	}
}

// mapGetter is an in-memory verify.Getter.
type mapGetter map[string][]byte

func (g mapGetter) Get(_ context.Context, key string) ([]byte, error) {
	b, ok := g[key]
	if !ok {
		return nil, errors.New("not found")
	}
	return b, nil
}

func TestLogWalksParentsOnce(t *testing.T) {
	g := mapGetter{}
	table, _ := verify.EncodeMembers([]verify.Member{member("a", "", "a")})
	mk := func(purpose string, parents ...verify.Digest) verify.Digest {
		m := &verify.Manifest{Purpose: purpose, Parents: parents,
			Members: verify.MembersRef{URI: verify.MembersURI(verify.SHA256(table)), Count: 1, Bytes: 1}}
		b, err := verify.Build(m)
		if err != nil {
			t.Fatal(err)
		}
		g[verify.ManifestKey(m.SnapshotID)] = b
		return m.SnapshotID
	}
	root := mk("root")
	l := mk("left", root)
	r := mk("right", root)
	missing := verify.SHA256([]byte("missing"))
	top := mk("top", l, r, missing)
	var got []string
	var failed int
	err := Log(context.Background(), g, top, func(e Entry) {
		if e.Err != nil {
			failed++
			got = append(got, "FAIL")
			return
		}
		got = append(got, e.Manifest.Purpose)
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(got, ","); s != "top,left,right,FAIL,root" {
		t.Errorf("walk order %s", s)
	}
	if failed != 1 {
		t.Errorf("%d failures, want 1", failed)
	}
}

// boundedGetter holds one oversized manifest; it records the bound each
// read asked for, and fails a read without one.
type boundedGetter struct{ maxes []int64 }

func (g *boundedGetter) Get(ctx context.Context, key string) ([]byte, error) {
	return nil, errors.New("an unbounded Get of " + key)
}

func (g *boundedGetter) GetAtMost(ctx context.Context, key string, max int64) ([]byte, error) {
	g.maxes = append(g.maxes, max)
	return nil, store.TooLarge(key, max)
}

// TestLogReadsAManifestBounded: pinfs log reads each manifest at most
// store.MaxManifest bytes itself, as verify.Fetch does, rather than rely
// on the Getter's own bound (the stores bound Get by key kind; a wrapper
// need not).
func TestLogReadsAManifestBounded(t *testing.T) {
	g := &boundedGetter{}
	d := verify.Digest("sha256:" + strings.Repeat("0f", 32))
	var got []Entry
	if err := Log(t.Context(), g, d, func(e Entry) { got = append(got, e) }); err != nil {
		t.Fatal(err)
	}
	if len(g.maxes) != 1 || g.maxes[0] != store.MaxManifest {
		t.Fatalf("Log read the manifest with bounds %v, want one read of at most %d bytes", g.maxes, store.MaxManifest)
	}
	if len(got) != 1 || !errors.Is(got[0].Err, store.ErrTooLarge) {
		t.Fatalf("Log reported %+v, want the manifest too large", got)
	}
}
