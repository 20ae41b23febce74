package pin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/store/versions"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// bigValue is a member of more than one Bao group, so it has an outboard.
func bigValue(seed string) string { return strings.Repeat(seed, b3.GroupSize/len(seed)*2+1) }

// newReuseS3 is newFakeS3 whose store lives in root, in bucket.
func newReuseS3(t *testing.T, root, bucket string, keys map[string]string) *fakeS3 {
	t.Helper()
	ls, err := localstore.New(root)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeS3{Store: ls, objects: map[store.Object][]byte{}}
	for k, v := range keys {
		f.put(bucket, k, "v1-"+k, v)
	}
	return f
}

// put adds (or replaces) the current version of key.
func (f *fakeS3) put(bucket, key, version, v string) {
	obj := store.Object{Bucket: bucket, Key: key, VersionID: version}
	f.objects[obj] = []byte(v)
	ov := store.ObjectVersion{Key: key, VersionID: version, Size: int64(len(v))}
	for i := range f.list {
		if f.list[i].Key == key {
			f.list[i] = ov
			return
		}
	}
	f.list = append(f.list, ov)
	slices.SortFunc(f.list, func(a, b store.ObjectVersion) int { return strings.Compare(a.Key, b.Key) })
}

// pinOnce pins bucket/prefix with opts and returns the digest, stats and
// the keys read.
func pinOnce(t *testing.T, f *fakeS3, bucket, prefix string, opts Options) (verify.Digest, Stats, []string) {
	t.Helper()
	f.mu.Lock()
	f.reads = nil
	f.mu.Unlock()
	p := &Pinner{Store: f, Lister: f, Options: opts}
	d, err := p.S3(context.Background(), bucket, prefix)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range f.reads {
		keys = append(keys, r.Key)
	}
	slices.Sort(keys)
	return d, p.Stats(), keys
}

func sampleKeys() map[string]string {
	return map[string]string{"p/a": "alpha", "p/b": "beta", "p/big1": bigValue("one"), "p/big2": bigValue("two")}
}

func TestPinReusesKnownVersionsAndReadsNewOnes(t *testing.T) {
	f := newReuseS3(t, t.TempDir(), "b", sampleKeys())
	d1, s1, _ := pinOnce(t, f, "b", "p/", Options{})
	if s1.Read != 4 || s1.Reused != 0 || s1.CacheError != "" {
		t.Fatalf("first pin: %+v, want 4 read", s1)
	}
	d2, s2, reads := pinOnce(t, f, "b", "p/", Options{})
	if d2 != d1 || s2.Reused != 4 || s2.Read != 0 || len(reads) != 0 || s2.ReadBytes != 0 {
		t.Fatalf("re-pin: %s %+v reads %v, want %s with 4 reused", d2, s2, reads, d1)
	}
	if s2.MetaBytes < int64(2*b3.OutboardSize(int64(len(bigValue("one"))))) {
		t.Errorf("re-pin counted %d meta bytes, less than the two outboards it fetched", s2.MetaBytes)
	}
	f.put("b", "p/big1", "v2", bigValue("uno"))
	f.put("b", "p/c", "v1", "gamma")
	d3, s3, reads := pinOnce(t, f, "b", "p/", Options{})
	if s3.Reused != 3 || s3.Read != 2 || fmt.Sprint(reads) != "[p/big1 p/c]" {
		t.Fatalf("pin after a change: %+v reads %v, want p/big1 and p/c read", s3, reads)
	}
	if s3.ReadBytes != int64(len(bigValue("uno"))+len("gamma")) {
		t.Errorf("read %d bytes, want the two changed members", s3.ReadBytes)
	}
	d4, s4, reads := pinOnce(t, f, "b", "p/", Options{Rehash: true})
	if d4 != d3 || s4.Reused != 0 || s4.Read != 5 || len(reads) != 5 || s4.Disagreed != 0 {
		t.Fatalf("--rehash: %s %+v, want %s read whole and no disagreement", d4, s4, d3)
	}
}

// record puts entries into the digest cache of b/p/ directly.
func record(t *testing.T, f *fakeS3, es ...versions.Entry) {
	t.Helper()
	if err := versions.Open(f, "b", "p/").Record(context.Background(), es, nil); err != nil {
		t.Fatal(err)
	}
}

func TestPinReadsAVersionTheCacheGetsWrong(t *testing.T) {
	f := newReuseS3(t, t.TempDir(), "b", sampleKeys())
	want, _, _ := pinOnce(t, newReuseS3(t, t.TempDir(), "b", sampleKeys()), "b", "p/", Options{})
	record(t, f,
		versions.Entry{Key: "p/a", VersionID: "v1-p/a", Size: 6, Digest: b3.Of([]byte("alpha"))}, // wrong size
		versions.Entry{Key: "p/b", VersionID: "v1-p/b", Size: 4, Digest: b3.Of([]byte("other"))}, // wrong digest
		versions.Entry{Key: "p/big1", VersionID: "v1-p/big1", Size: int64(len(bigValue("one"))), Digest: b3.Of([]byte(bigValue("one")))})
	// p/big1's outboard is not in the store yet: it must be read.
	d, s, reads := pinOnce(t, f, "b", "p/", Options{})
	if fmt.Sprint(reads) != "[p/a p/big1 p/big2]" || s.Reused != 1 || s.Disagreed != 1 {
		t.Fatalf("pin over a wrong cache: %+v reads %v, want p/a (size), p/big1 (no outboard), p/big2 read, p/b reused", s, reads)
	}
	// The cache's wrong digest of a small member is trusted (there is no
	// outboard to check): that is what --rehash and verify --deep audit.
	if d == want {
		t.Fatalf("a wrong small digest in the cache did not reach the manifest; the test is not testing")
	}
	// A version read again is appended to the cache and replaces the older
	// entry: p/a's wrong size is gone; p/b's wrong digest is left for
	// --rehash to find, and its read heals it.
	d, s, _ = pinOnce(t, f, "b", "p/", Options{Rehash: true})
	if d != want || s.Disagreed != 1 || s.Read != 4 || s.Reused != 0 {
		t.Fatalf("--rehash: %s %+v, want %s read whole with p/b's wrong entry counted", d, s, want)
	}
	d, s, reads = pinOnce(t, f, "b", "p/", Options{})
	if d != want || s.Disagreed != 0 || s.Reused != 4 || len(reads) != 0 {
		t.Fatalf("pin after --rehash: %s %+v reads %v, want %s all reused from the healed cache", d, s, reads, want)
	}
}

func TestPinReadsAMemberWhoseOutboardIsMissingOrBad(t *testing.T) {
	for _, damage := range []string{"missing", "corrupt", "short"} {
		t.Run(damage, func(t *testing.T) {
			root := t.TempDir()
			f := newReuseS3(t, root, "b", sampleKeys())
			d1, _, _ := pinOnce(t, f, "b", "p/", Options{})
			big := []byte(bigValue("one"))
			key := verify.OutboardKey(b3.Of(big).Hex())
			good, err := f.Get(context.Background(), key)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(root, filepath.FromSlash(key))
			switch damage {
			case "missing":
				err = os.Remove(file)
			case "corrupt":
				bad := bytes.Clone(good)
				bad[len(bad)-1] ^= 1
				err = os.WriteFile(file, bad, 0o644)
			case "short":
				err = os.WriteFile(file, good[:len(good)-8], 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
			d2, s, reads := pinOnce(t, f, "b", "p/", Options{})
			if d2 != d1 || fmt.Sprint(reads) != "[p/big1]" || s.Read != 1 || s.Reused != 3 {
				t.Fatalf("pin with a %s outboard: %s %+v reads %v, want only p/big1 read", damage, d2, s, reads)
			}
			if got, err := f.Get(context.Background(), key); err != nil || !bytes.Equal(got, good) {
				t.Fatalf("outboard after the pin: %d bytes, %v; want it restored", len(got), err)
			}
		})
	}
}

func TestPinReusesParentMembersOfItsBucketOnly(t *testing.T) {
	root := t.TempDir()
	keys := map[string]string{"p/sub/a": "alpha", "p/sub/big": bigValue("one"), "p/x": "x"}
	parent, _, _ := pinOnce(t, newReuseS3(t, root, "b", keys), "b", "p/", Options{})
	delete(keys, "p/x") // the fake lists every key it holds
	_, s, reads := pinOnce(t, newReuseS3(t, root, "b", keys), "b", "p/sub/", Options{Parents: []verify.Digest{parent}})
	if s.Reused != 2 || s.Read != 0 || len(reads) != 0 {
		t.Fatalf("sub-prefix with a parent: %+v reads %v, want both members reused from the parent", s, reads)
	}
	// The same keys and versions in another bucket are other objects.
	g := newReuseS3(t, root, "c", keys)
	_, s, reads = pinOnce(t, g, "c", "p/sub/", Options{Parents: []verify.Digest{parent}})
	if s.Reused != 0 || s.Read != 2 || len(reads) != 2 {
		t.Fatalf("other bucket with a parent: %+v reads %v, want both read", s, reads)
	}
}

func TestPinFailsOnAMissingParent(t *testing.T) {
	f := newReuseS3(t, t.TempDir(), "b", sampleKeys())
	p := &Pinner{Store: f, Lister: f, Options: Options{Parents: []verify.Digest{verify.SHA256([]byte("none"))}}}
	if _, err := p.S3(context.Background(), "b", "p/"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("pin with a missing parent: %v", err)
	}
	if len(f.reads) != 0 {
		t.Errorf("read %d members before finding the parent missing", len(f.reads))
	}
}

// watchedIndex records the Record calls of a real index.
type watchedIndex struct {
	cacheIndex
	fail error

	mu    sync.Mutex
	calls []string // "fresh/live" counts, live -1 for nil
}

func (w *watchedIndex) Record(ctx context.Context, fresh, live []versions.Entry) error {
	w.mu.Lock()
	n := -1
	if live != nil {
		n = len(live)
	}
	w.calls = append(w.calls, fmt.Sprintf("%d/%d", len(fresh), n))
	w.mu.Unlock()
	if w.fail != nil {
		return w.fail
	}
	return w.cacheIndex.Record(ctx, fresh, live)
}

func watch(p *Pinner, w *watchedIndex) {
	p.openCache = func(bucket, prefix string) (cacheIndex, error) {
		w.cacheIndex = versions.Open(p.Store.(versions.Store), bucket, prefix)
		return w, nil
	}
}

func TestPinCheckpointsEvery1024Members(t *testing.T) {
	defer func(d time.Duration) { checkpointPeriod = d }(checkpointPeriod)
	checkpointPeriod = time.Hour // only the count may trigger a checkpoint here
	keys := map[string]string{}
	for i := range 1030 {
		keys[fmt.Sprintf("p/%04d", i)] = fmt.Sprint(i)
	}
	f := newReuseS3(t, t.TempDir(), "b", keys)
	w := &watchedIndex{}
	p := &Pinner{Store: f, Lister: f}
	watch(p, w)
	d, err := p.S3(context.Background(), "b", "p/")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(w.calls); got != "[1024/-1 6/1030]" {
		t.Fatalf("Record calls %s, want a checkpoint of 1024 and the rest with the live entries", got)
	}
	w2 := &watchedIndex{}
	p2 := &Pinner{Store: f, Lister: f}
	watch(p2, w2)
	d2, err := p2.S3(context.Background(), "b", "p/")
	if err != nil || d2 != d || p2.Stats().Reused != 1030 || len(w2.calls) != 0 {
		t.Fatalf("re-pin: %s %v %+v, Record calls %v; want all reused and nothing recorded", d2, err, p2.Stats(), w2.calls)
	}
}

func TestPinRerunReusesWhatAFailedPinRead(t *testing.T) {
	f := newReuseS3(t, t.TempDir(), "b", sampleKeys())
	gone := store.Object{Bucket: "b", Key: "p/b", VersionID: "v1-p/b"}
	b := f.objects[gone]
	delete(f.objects, gone)
	if _, err := (&Pinner{Store: f, Lister: f}).S3(context.Background(), "b", "p/"); err == nil {
		t.Fatal("pin with a vanished version succeeded")
	}
	f.objects[gone] = b
	_, s, reads := pinOnce(t, f, "b", "p/", Options{})
	if fmt.Sprint(reads) != "[p/b]" || s.Reused != 3 {
		t.Fatalf("rerun: %+v reads %v, want only p/b read", s, reads)
	}
}

func TestPinSucceedsWhenTheCacheFails(t *testing.T) {
	f := newReuseS3(t, t.TempDir(), "b", sampleKeys())
	want, _, _ := pinOnce(t, newReuseS3(t, t.TempDir(), "b", sampleKeys()), "b", "p/", Options{})
	w := &watchedIndex{fail: fmt.Errorf("no conditional writes: %w", store.ErrNotExclusive)}
	p := &Pinner{Store: f, Lister: f}
	watch(p, w)
	d, err := p.S3(context.Background(), "b", "p/")
	if err != nil || d != want {
		t.Fatalf("pin with a failing cache: %s, %v; want %s", d, err, want)
	}
	if s := p.Stats(); !strings.Contains(s.CacheError, "conditional writes") || s.Read != 4 {
		t.Fatalf("stats %+v, want the cache error reported", s)
	}
}

func TestStatsString(t *testing.T) {
	s := Stats{Members: 100000, Reused: 99000, Read: 1000, ReadBytes: 4096000, MetaBytes: 81920, Disagreed: 2, CacheError: "x"}
	want := "100000 members: 99000 reused, 1000 read; read 4096000 bytes of members, 81920 bytes of index and outboards"
	if got := s.String(); got != want {
		t.Fatalf("Stats.String() = %q, want %q", got, want)
	}
}
