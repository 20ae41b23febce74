package versions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/jcs"
)

func newLocal(t *testing.T) (*localstore.Store, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := localstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st, dir
}

// entries returns n made-up entries named after tag.
func entries(tag string, n int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		es[i] = entry(fmt.Sprintf("%s/%04d", tag, i), "v"+tag, int64(i))
	}
	return es
}

func mustLoad(t *testing.T, x *Index) *Table {
	t.Helper()
	tb, err := x.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func mustRecord(t *testing.T, x *Index, fresh, live []Entry) {
	t.Helper()
	if err := x.Record(t.Context(), fresh, live); err != nil {
		t.Fatal(err)
	}
}

// headSegments returns the segments the stored head names.
func headSegments(t *testing.T, st Store, source string) []verify.Digest {
	t.Helper()
	b, _, err := st.Load(t.Context(), HeadKey(source))
	if err != nil {
		t.Fatal(err)
	}
	segs, err := parseHead(source, b)
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

// hasExactly fails unless tb holds exactly es.
func hasExactly(t *testing.T, tb *Table, es []Entry) {
	t.Helper()
	for _, e := range es {
		if got, ok := tb.Lookup(e.Key, e.VersionID); !ok || got != e {
			t.Fatalf("Lookup(%s, %s) = %+v, %v; want %+v", e.Key, e.VersionID, got, ok, e)
		}
	}
	if tb.Len() != len(es) {
		t.Fatalf("table of %d entries, want %d", tb.Len(), len(es))
	}
}

func TestSource(t *testing.T) {
	for _, tc := range [][3]string{{"b", "", "s3://b/"}, {"b", "p", "s3://b/p/"}, {"b", "p/", "s3://b/p/"}, {"b", "p/q", "s3://b/p/q/"}} {
		if got := Source(tc[0], tc[1]); got != tc[2] {
			t.Errorf("Source(%q, %q) = %q, want %q", tc[0], tc[1], got, tc[2])
		}
	}
	if HeadKey("s3://b/p/") != "versions/heads/sha256/"+verify.SHA256([]byte("s3://b/p/")).Hex() {
		t.Error("HeadKey is not named by the SHA-256 of the source")
	}
}

func TestLoadEmpty(t *testing.T) {
	st, _ := newLocal(t)
	tb := mustLoad(t, Open(st, "b", "p"))
	if tb.Len() != 0 || tb.Skipped != 0 || tb.Bytes != 0 {
		t.Fatalf("empty store: %d entries, %d skipped, %d bytes", tb.Len(), tb.Skipped, tb.Bytes)
	}
	mustRecord(t, Open(st, "b", "p"), nil, nil)
	if _, _, err := st.Load(t.Context(), HeadKey(Source("b", "p"))); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Record of nothing wrote a head: %v", err)
	}
}

func TestRecordLoad(t *testing.T) {
	st, _ := newLocal(t)
	x := Open(st, "b", "p")
	a, b := entries("a", 10), entries("b", 5)
	mustRecord(t, x, a, nil)
	mustRecord(t, x, b, nil)
	mustRecord(t, x, b, nil)               // the same segment again: the head already names it
	tb := mustLoad(t, Open(st, "b", "p/")) // the same source
	hasExactly(t, tb, append(slices.Clone(a), b...))
	if tb.Skipped != 0 || tb.Bytes == 0 {
		t.Fatalf("%d skipped, %d bytes read", tb.Skipped, tb.Bytes)
	}
	if segs := headSegments(t, st, Source("b", "p")); len(segs) != 2 {
		t.Fatalf("head names %d segments, want 2", len(segs))
	}
	for name, other := range map[string]*Index{"other prefix": Open(st, "b", "q"), "other bucket": Open(st, "c", "p")} {
		if tb := mustLoad(t, other); tb.Len() != 0 {
			t.Errorf("%s: %d entries", name, tb.Len())
		}
	}
}

func TestHeadCanonical(t *testing.T) {
	st, _ := newLocal(t)
	x := Open(st, "b", "p")
	mustRecord(t, x, entries("a", 1), nil)
	b, _, err := st.Load(t.Context(), HeadKey(Source("b", "p")))
	if err != nil {
		t.Fatal(err)
	}
	canon, err := jcs.Canonicalize(b)
	if err != nil || !bytes.Equal(canon, b) {
		t.Fatalf("head %s is not canonical JSON (%v)", b, err)
	}
	seg, _ := Encode("b", entries("a", 1))
	want := `{"schema":"pinfs.versions.head.v1","segments":["` + verify.SHA256(seg).String() + `"],"source":"s3://b/p/"}`
	if string(b) != want {
		t.Fatalf("head %s, want %s", b, want)
	}
	d := verify.SHA256(seg).String()
	for name, bad := range map[string]string{
		"not JSON":      `{`,
		"other schema":  `{"schema":"pinfs.versions.head.v2","segments":[],"source":"s3://b/p/"}`,
		"other source":  `{"schema":"pinfs.versions.head.v1","segments":[],"source":"s3://b/q/"}`,
		"unknown field": `{"extra":1,"schema":"pinfs.versions.head.v1","segments":[],"source":"s3://b/p/"}`,
		"not a digest":  `{"schema":"pinfs.versions.head.v1","segments":["blake3:00"],"source":"s3://b/p/"}`,
		"duplicate":     `{"schema":"pinfs.versions.head.v1","segments":["` + d + `","` + d + `"],"source":"s3://b/p/"}`,
		"null segments": `{"schema":"pinfs.versions.head.v1","segments":null,"source":"s3://b/p/"}`,
		"not canonical": `{"source":"s3://b/p/","schema":"pinfs.versions.head.v1","segments":[]}`,
		"trailing":      `{"schema":"pinfs.versions.head.v1","segments":[],"source":"s3://b/p/"} {}`,
	} {
		if _, err := parseHead("s3://b/p/", []byte(bad)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	if segs, err := parseHead("s3://b/p/", []byte(`{"schema":"pinfs.versions.head.v1","segments":[],"source":"s3://b/p/"}`)); err != nil || len(segs) != 0 {
		t.Fatalf("empty head: %v, %v", segs, err)
	}
}

// TestLoadSkips: a tampered segment, a missing one, one of another bucket
// and a bad head are skipped and counted; the rest still loads.
func TestLoadSkips(t *testing.T) {
	st, dir := newLocal(t)
	x := Open(st, "b", "p")
	a, b, c := entries("a", 3), entries("b", 3), entries("c", 3)
	for _, es := range [][]Entry{a, b, c} {
		mustRecord(t, x, es, nil)
	}
	segs := headSegments(t, st, Source("b", "p"))
	file := func(d verify.Digest) string { return filepath.Join(dir, filepath.FromSlash(SegmentKey(d))) }

	raw, err := os.ReadFile(file(segs[0]))
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 1 // a digest byte of a's last entry
	if err := os.WriteFile(file(segs[0]), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	tb := mustLoad(t, x)
	if tb.Skipped != 1 {
		t.Fatalf("tampered segment: %d skipped, want 1", tb.Skipped)
	}
	hasExactly(t, tb, append(slices.Clone(b), c...))

	if err := os.Remove(file(segs[1])); err != nil {
		t.Fatal(err)
	}
	tb = mustLoad(t, x)
	if tb.Skipped != 2 {
		t.Fatalf("missing segment: %d skipped, want 2", tb.Skipped)
	}
	hasExactly(t, tb, c)

	// A segment of another bucket, named by the head of this source.
	other, err := Encode("other", entries("o", 2))
	if err != nil {
		t.Fatal(err)
	}
	od := verify.SHA256(other)
	if err := st.Put(t.Context(), SegmentKey(od), other); err != nil {
		t.Fatal(err)
	}
	// A segment of this bucket that hashes to its name but does not parse
	// (a byte after its last entry): none of its entries is loaded.
	bad, err := Encode("b", entries("bad", 3))
	if err != nil {
		t.Fatal(err)
	}
	bad = append(bad, 0)
	bd := verify.SHA256(bad)
	if err := st.Put(t.Context(), SegmentKey(bd), bad); err != nil {
		t.Fatal(err)
	}
	swapHead(t, st, Source("b", "p"), append(slices.Clone(segs), od, bd))
	tb = mustLoad(t, x)
	if tb.Skipped != 4 {
		t.Fatalf("segments of another bucket and unparsable: %d skipped, want 4", tb.Skipped)
	}
	hasExactly(t, tb, c)
}

// swapHead replaces the head of source with one naming segs.
func swapHead(t *testing.T, st Store, source string, segs []verify.Digest) {
	t.Helper()
	h, err := encodeHead(source, segs)
	if err != nil {
		t.Fatal(err)
	}
	swapRaw(t, st, source, h)
}

func swapRaw(t *testing.T, st Store, source string, b []byte) {
	t.Helper()
	_, rev, err := st.Load(t.Context(), HeadKey(source))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	if err := st.Swap(t.Context(), HeadKey(source), b, rev); err != nil {
		t.Fatal(err)
	}
}

// TestBadHeadReplaced: a head that does not parse reads as empty, and the
// next Record replaces it.
func TestBadHeadReplaced(t *testing.T) {
	st, _ := newLocal(t)
	x := Open(st, "b", "p")
	mustRecord(t, x, entries("a", 3), nil)
	swapRaw(t, st, Source("b", "p"), []byte(`{"schema":"something else"}`))
	tb := mustLoad(t, x)
	if tb.Len() != 0 || tb.Skipped != 1 || tb.Bytes == 0 {
		t.Fatalf("bad head: %d entries, %d skipped, %d bytes", tb.Len(), tb.Skipped, tb.Bytes)
	}
	b := entries("b", 2)
	mustRecord(t, x, b, nil)
	tb = mustLoad(t, x)
	if tb.Skipped != 0 {
		t.Fatalf("after Record: %d skipped", tb.Skipped)
	}
	hasExactly(t, tb, b)
}

// TestCompaction: after MaxSegments appends, a Record with live entries
// replaces them all with one segment of exactly live and fresh.
func TestCompaction(t *testing.T) {
	st, _ := newLocal(t)
	x := Open(st, "b", "p")
	var all []Entry
	for i := range MaxSegments {
		es := entries(fmt.Sprint("s", i), 2)
		all = append(all, es...)
		mustRecord(t, x, es, nil)
	}
	if n := len(headSegments(t, st, Source("b", "p"))); n != MaxSegments {
		t.Fatalf("head of %d segments, want %d", n, MaxSegments)
	}
	fresh := entries("fresh", 3)
	mustRecord(t, x, fresh, nil) // no live: no compaction
	if n := len(headSegments(t, st, Source("b", "p"))); n != MaxSegments+1 {
		t.Fatalf("head of %d segments without live, want %d", n, MaxSegments+1)
	}
	fresh2 := entries("fresh2", 2)
	live := append(slices.Clone(all[:5]), fresh...) // the rest is gone from the source
	mustRecord(t, x, fresh2, live)
	if n := len(headSegments(t, st, Source("b", "p"))); n != 1 {
		t.Fatalf("head of %d segments after compaction, want 1", n)
	}
	hasExactly(t, mustLoad(t, x), append(slices.Clone(live), fresh2...))
}

// hookStore runs before once, at its first Swap, before swapping.
type hookStore struct {
	*localstore.Store
	once   sync.Once
	before func()
}

func (h *hookStore) Swap(ctx context.Context, key string, data []byte, rev string) error {
	h.once.Do(h.before)
	return h.Store.Swap(ctx, key, data, rev)
}

// TestCompactionKeepsConcurrent: a segment appended by another writer
// while Record compacts is kept beside the compacted one.
func TestCompactionKeepsConcurrent(t *testing.T) {
	st, _ := newLocal(t)
	x := Open(st, "b", "p")
	for i := range MaxSegments {
		mustRecord(t, x, entries(fmt.Sprint("s", i), 1), nil)
	}
	other := entries("other", 2)
	hs := &hookStore{Store: st}
	hs.before = func() { mustRecord(t, Open(st, "b", "p"), other, nil) }
	live := entries("live", 4)
	mustRecord(t, Open(hs, "b", "p"), live[:1], live)
	if n := len(headSegments(t, st, Source("b", "p"))); n != 2 {
		t.Fatalf("head of %d segments, want the compacted one and the concurrent one", n)
	}
	hasExactly(t, mustLoad(t, x), append(slices.Clone(live), other...))
}

// TestRecordConcurrent: 8 writers appending at once lose no segment.
func TestRecordConcurrent(t *testing.T) {
	st, _ := newLocal(t)
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	var want []Entry
	for i := range writers {
		es := entries(fmt.Sprint("w", i), 50)
		want = append(want, es...)
		wg.Go(func() { errs[i] = Open(st, "b", "p").Record(t.Context(), es, nil) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	tb := mustLoad(t, Open(st, "b", "p"))
	hasExactly(t, tb, want)
	if tb.Skipped != 0 {
		t.Fatalf("%d skipped", tb.Skipped)
	}
}

// noCondition is a store whose server does not do conditional writes.
type noCondition struct{ *localstore.Store }

func (noCondition) Swap(context.Context, string, []byte, string) error {
	return fmt.Errorf("no conditional writes: %w", store.ErrNotExclusive)
}

func TestRecordNotExclusive(t *testing.T) {
	st, _ := newLocal(t)
	err := Open(noCondition{st}, "b", "p").Record(t.Context(), entries("a", 1), nil)
	if !errors.Is(err, store.ErrNotExclusive) {
		t.Fatalf("Record = %v, want ErrNotExclusive", err)
	}
}

// alwaysConflict is a store whose head always changes under the writer.
type alwaysConflict struct {
	*localstore.Store
	swaps int
}

func (a *alwaysConflict) Swap(context.Context, string, []byte, string) error {
	a.swaps++
	return fmt.Errorf("lost: %w", store.ErrConflict)
}

func TestRecordGivesUp(t *testing.T) {
	st, _ := newLocal(t)
	ac := &alwaysConflict{Store: st}
	err := Open(ac, "b", "p").Record(t.Context(), entries("a", 1), nil)
	if !errors.Is(err, store.ErrConflict) || ac.swaps != retries+1 {
		t.Fatalf("Record = %v after %d swaps, want ErrConflict after %d", err, ac.swaps, retries+1)
	}
}
