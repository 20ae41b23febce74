package pin

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/verify"
)

// fakeS3 serves versions from memory; it is both the Lister and the
// member reader of a pin, with blobs in a local store.
type fakeS3 struct {
	*localstore.Store
	objects map[store.Object][]byte
	list    []store.ObjectVersion

	mu    sync.Mutex
	reads []store.Object
	lists int // ListCurrent calls so far
	// beforeList, when set, runs at the start of ListCurrent call n (1, 2, ...).
	beforeList func(n int)
}

func (f *fakeS3) ListCurrent(context.Context, string, string) ([]store.ObjectVersion, error) {
	f.mu.Lock()
	f.lists++
	n := f.lists
	f.mu.Unlock()
	if f.beforeList != nil {
		f.beforeList(n)
	}
	return slices.Clone(f.list), nil
}

func (f *fakeS3) ReadRange(_ context.Context, obj store.Object, off, n int64) (io.ReadCloser, error) {
	if err := obj.Validate(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.reads = append(f.reads, obj)
	f.mu.Unlock()
	b, ok := f.objects[obj]
	if !ok {
		return nil, store.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(b[off:])), nil
}

func newFakeS3(t *testing.T, keys map[string]string) *fakeS3 {
	ls, err := localstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeS3{Store: ls, objects: map[store.Object][]byte{}}
	for k, v := range keys {
		obj := store.Object{Bucket: "b", Key: k, VersionID: "v-" + k}
		f.objects[obj] = []byte(v)
		f.list = append(f.list, store.ObjectVersion{Key: k, VersionID: obj.VersionID, Size: int64(len(v))})
	}
	return f
}

func TestS3PinReadsPinnedVersions(t *testing.T) {
	f := newFakeS3(t, map[string]string{"p/train/a": "a", "p/b": "bb"})
	p := &Pinner{Store: f, Lister: f}
	d, err := p.S3(context.Background(), "b", "p")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := verify.Load(context.Background(), f, d)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range snap.Members() {
		if m.S3 == nil || m.S3.VersionID != "v-"+m.S3.Key || "p/"+m.Path != m.S3.Key {
			t.Errorf("member %+v not pinned to its listed version", m)
		}
	}
	for _, r := range f.reads {
		if r.VersionID == "" {
			t.Errorf("read without version: %v", r)
		}
	}
	if len(f.reads) != 2 {
		t.Errorf("%d reads, want each object read once", len(f.reads))
	}
}

func TestS3PinRefusesHostileKeysAndNullVersions(t *testing.T) {
	for name, tc := range map[string]struct {
		key, version, want string
	}{
		"dotdot":      {"p/../etc/passwd", "v1", "unsafe path"},
		"empty comp":  {"p/a//b", "v1", "unsafe path"},
		"dot":         {"p/./a", "v1", "unsafe path"},
		"null":        {"p/a", "null", "not versioned"},
		"no version":  {"p/a", "", "no pinned version"},
		"long name":   {"p/" + strings.Repeat("x", 256), "v1", "unsafe path"},
		"bad unicode": {"p/\xff", "v1", "unsafe path"},
		"newline":     {"p/x\n/etc/shadow", "v1", "unsafe path"},
		"escape":      {"p/a\x1b[2J", "v1", "unsafe path"},
		"c1":          {"p/a\u009bb", "v1", "unsafe path"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeS3(t, map[string]string{"p/ok": "ok"})
			f.list = append(f.list, store.ObjectVersion{Key: tc.key, VersionID: tc.version, Size: 1})
			_, err := (&Pinner{Store: f, Lister: f}).S3(context.Background(), "b", "p/")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("pin of %q@%q: %v, want %q", tc.key, tc.version, err, tc.want)
			}
			if len(f.reads) != 0 {
				t.Errorf("refused pin still read %d objects", len(f.reads))
			}
		})
	}
}

func TestS3PinFailsWhenAVersionDisappears(t *testing.T) {
	f := newFakeS3(t, map[string]string{"p/a": "a", "p/b": "b"})
	delete(f.objects, store.Object{Bucket: "b", Key: "p/b", VersionID: "v-p/b"})
	_, err := (&Pinner{Store: f, Lister: f}).S3(context.Background(), "b", "p/")
	if err == nil || !strings.Contains(err.Error(), "b: not found") {
		t.Fatalf("pin with a vanished version: %v", err)
	}
}
