package s3store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/b3"
)

var ctx = context.Background()

func mustVersion(t testing.TB, bucket, key, id string) store.Object {
	t.Helper()
	obj, err := store.NewVersion(bucket, key, id)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// mustBucket returns the store in bucket under prefix, reached through c.
func mustBucket(t testing.TB, c *Client, bucket, prefix string) *Bucket {
	t.Helper()
	b, err := NewBucket(c, bucket, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readRange(c *Client, obj store.Object, off, length int64) ([]byte, error) {
	rc, err := c.ReadRange(ctx, obj, off, length)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// TestMemberReadsCarryVersion is the recording test of the invariant: every
// GET and HEAD of a member object names the pinned version, and the client
// returns the bytes of that version, not the current one.
func TestMemberReadsCarryVersion(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("data", "Enabled")
	old := []byte("the old bytes of a.bin, pinned")
	v1 := f.put("data", "dir/a.bin", old)
	f.put("data", "dir/a.bin", []byte("newer bytes that must never be served"))
	obj := mustVersion(t, "data", "dir/a.bin", v1)

	for _, tc := range []struct {
		off, length int64
		rng         string
	}{
		{0, -1, ""},
		{4, -1, "bytes=4-"},
		{0, 3, "bytes=0-2"},
		{8, 5, "bytes=8-12"},
		{int64(len(old)) - 1, 1, fmt.Sprintf("bytes=%d-%d", len(old)-1, len(old)-1)},
	} {
		n := len(f.requests())
		got, err := readRange(c, obj, tc.off, tc.length)
		want := old[tc.off:]
		if tc.length >= 0 {
			want = want[:tc.length]
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("ReadRange(%d, %d) = %q, %v; want %q", tc.off, tc.length, got, err, want)
		}
		if reqs := f.requests()[n:]; len(reqs) != 1 || reqs[0].Header.Get("Range") != tc.rng {
			t.Errorf("ReadRange(%d, %d): want one GET with Range %q, got %v", tc.off, tc.length, tc.rng, describe(reqs))
		}
	}
	info, err := c.Stat(ctx, obj)
	if err != nil || info.Size != int64(len(old)) || info.ETag == "" {
		t.Errorf("Stat = %+v, %v; want size %d and an ETag", info, err, len(old))
	}
	if got, err := readRange(c, obj, int64(len(old)), 0); err != nil || len(got) != 0 {
		t.Errorf("zero-length read at the end = %q, %v", got, err)
	}
	if got, err := readRange(c, obj, int64(len(old)), -1); err != nil || len(got) != 0 {
		t.Errorf("read from the end = %q, %v", got, err)
	}
	if _, err := readRange(c, obj, int64(len(old))+1, -1); err == nil {
		t.Error("read beyond the end: want error")
	}

	reqs := f.requests()
	if len(reqs) == 0 {
		t.Fatal("no requests recorded")
	}
	for _, r := range reqs {
		if !strings.HasPrefix(r.URL.Path, "/data/") {
			t.Errorf("%s %s: not path-style", r.Method, r.URL)
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			t.Errorf("%s %s: a reader sent a write", r.Method, r.URL)
		}
		if got := r.URL.Query()["versionId"]; len(got) != 1 || got[0] != v1 {
			t.Errorf("%s %s: versionId %q; want exactly %q", r.Method, r.URL, got, v1)
		}
		if auth := r.Header.Get("Authorization"); !strings.Contains(auth, "/us-east-1/s3/aws4_request") {
			t.Errorf("%s %s: not signed for the default region us-east-1: %q", r.Method, r.URL, auth)
		}
	}
}

func describe(reqs []*http.Request) []string {
	var s []string
	for _, r := range reqs {
		s = append(s, fmt.Sprintf("%s %s Range=%q", r.Method, r.URL, r.Header.Get("Range")))
	}
	return s
}

// TestUnpinnedObjectsSendNothing: objects without a real version are
// refused before any request.
func TestUnpinnedObjectsSendNothing(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("data", "Enabled")
	f.put("data", "k", []byte("x"))
	for _, tc := range []struct {
		obj  store.Object
		want error
	}{
		{store.Object{Bucket: "data", Key: "k"}, store.ErrNoVersion},
		{store.Object{Bucket: "data", Key: "k", VersionID: "null"}, store.ErrUnversioned},
		{store.Object{Key: "k", VersionID: "v001"}, nil},
		{store.Object{}, nil},
		{store.Object{CAS: "blake3:" + strings.Repeat("0", 64)}, nil},
	} {
		if _, err := c.ReadRange(ctx, tc.obj, 0, -1); err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("ReadRange(%+v) = %v; want %v", tc.obj, err, tc.want)
		}
		if _, err := c.Stat(ctx, tc.obj); err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("Stat(%+v) = %v; want %v", tc.obj, err, tc.want)
		}
	}
	if reqs := f.requests(); len(reqs) != 0 {
		t.Errorf("requests were sent for unpinned objects: %v", describe(reqs))
	}
}

func TestVersionMismatch(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("data", "Enabled")
	v1 := f.put("data", "k", []byte("0123456789"))
	obj := mustVersion(t, "data", "k", v1)
	for _, answer := range []string{"v999", "", "null"} {
		f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			if answer != "" {
				w.Header().Set("x-amz-version-id", answer)
			}
			w.Header().Set("Content-Length", "10")
			if rng := r.Header.Get("Range"); rng != "" {
				w.Header().Set("Content-Range", "bytes 0-9/10")
				w.WriteHeader(http.StatusPartialContent)
			}
			if r.Method == http.MethodGet {
				io.WriteString(w, "9876543210")
			}
			return true
		})
		for _, length := range []int64{-1, 4} {
			if got, err := readRange(c, obj, 0, length); !errors.Is(err, store.ErrVersionMismatch) {
				t.Errorf("answer %q: ReadRange(0, %d) = %q, %v; want ErrVersionMismatch", answer, length, got, err)
			}
		}
		if _, err := c.Stat(ctx, obj); !errors.Is(err, store.ErrVersionMismatch) {
			t.Errorf("answer %q: Stat = %v; want ErrVersionMismatch", answer, err)
		}
	}
}

func TestNotFound(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("data", "Enabled")
	v1 := f.put("data", "k", []byte("bytes"))
	marker := f.deleteKey("data", "k")
	for _, obj := range []store.Object{
		mustVersion(t, "data", "k", "v404"),     // NoSuchVersion
		mustVersion(t, "data", "missing", "v1"), // no such key
		mustVersion(t, "nobucket", "k", v1),     // NoSuchBucket
		mustVersion(t, "data", "k", marker),     // a delete marker's id
	} {
		_, err := readRange(c, obj, 0, -1)
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("ReadRange(%v) = %v; want ErrNotFound", obj, err)
		} else if !strings.Contains(err.Error(), obj.String()) {
			t.Errorf("ReadRange(%v): error %q does not name the object", obj, err)
		}
		if _, err := c.Stat(ctx, obj); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Stat(%v) = %v; want ErrNotFound", obj, err)
		}
	}
	// The pinned version is still readable although the key is deleted.
	if got, err := readRange(c, mustVersion(t, "data", "k", v1), 0, -1); err != nil || string(got) != "bytes" {
		t.Errorf("pinned version behind a delete marker = %q, %v", got, err)
	}
}

func TestAccessDenied(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("data", "Enabled")
	v1 := f.put("data", "k", []byte("bytes"))
	obj := mustVersion(t, "data", "k", v1)
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		writeErr(w, r, http.StatusForbidden, "AccessDenied")
		return true
	})
	b := mustBucket(t, c, "data", "store")
	checks := map[string]error{}
	_, checks["ReadRange"] = readRange(c, obj, 0, 2)
	_, checks["Stat"] = c.Stat(ctx, obj)
	_, checks["ListCurrent"] = c.ListCurrent(ctx, "data", "")
	_, checks["Get"] = b.Get(ctx, "manifests/x")
	checks["Put"] = b.Put(ctx, "manifests/x", []byte("m"))
	for op, err := range checks {
		if !errors.Is(err, store.ErrAccessDenied) {
			t.Errorf("%s = %v; want ErrAccessDenied", op, err)
		}
		if errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s = %v: also ErrNotFound", op, err)
		}
	}
}

// TestShortBody: a body that ends before the bytes asked for (or before its
// Content-Length) is io.ErrUnexpectedEOF, never a clean io.EOF.
func TestShortBody(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("data", "Enabled")
	v1 := f.put("data", "k", bytes.Repeat([]byte("x"), 100))
	obj := mustVersion(t, "data", "k", v1)

	// The server sends a consistent but short 206: 5 bytes for 10 asked.
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("x-amz-version-id", v1)
		w.Header().Set("Content-Range", "bytes 0-4/100")
		w.Header().Set("Content-Length", "5")
		w.WriteHeader(http.StatusPartialContent)
		io.WriteString(w, "xxxxx")
		return true
	})
	if got, err := readRange(c, obj, 0, 10); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short 206: %q, %v; want io.ErrUnexpectedEOF", got, err)
	}

	// The connection breaks after half of the promised Content-Length.
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return true
		}
		defer conn.Close()
		cutResponse(buf, v1)
		return true
	})
	for _, length := range []int64{-1, 10} {
		if got, err := readRange(c, obj, 0, length); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut connection, length %d: %q, %v; want io.ErrUnexpectedEOF", length, got, err)
		}
	}
}

// cutResponse writes the head of a 200/206 promising 10 bytes and 5 of them.
func cutResponse(buf *bufio.ReadWriter, version string) {
	fmt.Fprintf(buf, "HTTP/1.1 206 Partial Content\r\nx-amz-version-id: %s\r\n"+
		"Content-Range: bytes 0-9/100\r\nContent-Length: 10\r\n\r\nxxxxx", version)
	buf.Flush()
}

// TestRangeIgnored: a server that answers a ranged GET with the whole
// object must not have its bytes served as the range; the error wraps
// store.ErrBadResponse, which the block reader does not retry.
func TestRangeIgnored(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("data", "Enabled")
	v1 := f.put("data", "k", []byte("0123456789"))
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("x-amz-version-id", v1)
		io.WriteString(w, "0123456789")
		return true
	})
	for _, tc := range []struct{ off, length int64 }{{5, 3}, {0, 4}, {3, -1}} {
		got, err := readRange(c, mustVersion(t, "data", "k", v1), tc.off, tc.length)
		if !errors.Is(err, store.ErrBadResponse) {
			t.Errorf("ReadRange(%d, %d) with Range ignored = %q, %v; want ErrBadResponse", tc.off, tc.length, got, err)
		}
	}
}

// TestRetry: throttling and 5xx are retried by the SDK.
func TestRetry(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("data", "Enabled")
	v1 := f.put("data", "k", []byte("bytes"))
	var fails atomic.Int32
	fails.Store(2)
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if fails.Add(-1) < 0 {
			return false
		}
		writeErr(w, r, http.StatusServiceUnavailable, "SlowDown")
		return true
	})
	if got, err := readRange(c, mustVersion(t, "data", "k", v1), 0, -1); err != nil || string(got) != "bytes" {
		t.Errorf("after two 503s: %q, %v", got, err)
	}
	if n := len(f.requests()); n != 3 {
		t.Errorf("%d requests; want 3", n)
	}
}

func TestListCurrent(t *testing.T) {
	f, c := newFake(t)
	f.pageSize = 2 // pages split the versions of one key
	f.createBucket("src", "Enabled")
	f.put("src", "data/a", []byte("a1"))
	a2 := f.put("src", "data/a", []byte("a2 longer"))
	b1 := f.put("src", "data/b", []byte("b"))
	f.put("src", "data/gone", []byte("g"))
	f.deleteKey("src", "data/gone")
	f.put("src", "data/dir/", nil) // directory marker
	f.put("src", "data/dir/c", []byte("ccc"))
	f.put("src", "data/dir/c", []byte("c2"))
	f.deleteKey("src", "data/dir/c")
	c3 := f.put("src", "data/dir/c", []byte("c3!"))
	f.put("src", "other/x", []byte("not under the prefix"))

	got, err := c.ListCurrent(ctx, "src", "data/")
	if err != nil {
		t.Fatal(err)
	}
	want := []store.ObjectVersion{
		{Key: "data/a", VersionID: a2, Size: 9},
		{Key: "data/b", VersionID: b1, Size: 1},
		{Key: "data/dir/c", VersionID: c3, Size: 3},
	}
	if len(got) != len(want) {
		t.Fatalf("ListCurrent = %+v; want %+v", got, want)
	}
	for i := range want {
		if got[i].Key != want[i].Key || got[i].VersionID != want[i].VersionID ||
			got[i].Size != want[i].Size || !strings.HasPrefix(got[i].ETag, `"`) {
			t.Errorf("entry %d = %+v; want %+v with a quoted ETag", i, got[i], want[i])
		}
	}
	pages := 0
	for _, r := range f.requests() {
		if r.URL.Query().Has("versions") {
			pages++
		}
	}
	if pages < 5 {
		t.Errorf("%d list requests; the fake's page size should have forced at least 5", pages)
	}
}

func TestListCurrentRefusesUnversioned(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("plain", "")
	f.put("plain", "k", []byte("x"))
	f.createBucket("suspended", "Suspended")
	for _, bucket := range []string{"plain", "suspended"} {
		_, err := c.ListCurrent(ctx, bucket, "")
		if !errors.Is(err, store.ErrUnversioned) || !strings.Contains(err.Error(), bucket) {
			t.Errorf("ListCurrent(%s) = %v; want ErrUnversioned naming the bucket", bucket, err)
		}
	}
	for _, r := range f.requests() {
		if r.URL.Query().Has("versions") {
			t.Errorf("listed an unversioned bucket: %s", r.URL)
		}
	}
	if _, err := c.ListCurrent(ctx, "nobucket", ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ListCurrent(nobucket) = %v; want ErrNotFound", err)
	}
}

func TestListCurrentNullVersions(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("mixed", "")
	for i := range 13 {
		f.put("mixed", fmt.Sprintf("old/%02d", i), []byte("x"))
	}
	f.put("mixed", "new/overwritten", []byte("x"))
	f.mu.Lock()
	f.buckets["mixed"].versioning = "Enabled"
	f.mu.Unlock()
	f.put("mixed", "new/fresh", []byte("y"))
	f.put("mixed", "new/overwritten", []byte("z")) // the null version is no longer current

	if got, err := c.ListCurrent(ctx, "mixed", "new/"); err != nil || len(got) != 2 {
		t.Errorf("ListCurrent(new/) = %+v, %v; want two pinnable versions", got, err)
	}
	_, err := c.ListCurrent(ctx, "mixed", "")
	if !errors.Is(err, store.ErrUnversioned) {
		t.Fatalf("ListCurrent = %v; want ErrUnversioned", err)
	}
	msg := err.Error()
	for _, want := range []string{"old/00", "old/09", "and 3 more", "13 current versions"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if strings.Contains(msg, "old/10") || strings.Contains(msg, "new/") {
		t.Errorf("error %q names keys it should not", msg)
	}
}

func TestBucketBlobs(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("st", "Enabled")
	b := mustBucket(t, c, "st", "/pinfs/store/")
	if b.String() != "s3://st/pinfs/store" {
		t.Errorf("String = %q", b.String())
	}
	if _, err := b.Get(ctx, "manifests/m1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of a missing blob = %v; want ErrNotFound", err)
	}
	data := []byte(`{"manifest":1}`)
	if err := b.Put(ctx, "manifests/m1", data); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "manifests/m1"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	n := len(f.requests())
	if err := b.Put(ctx, "manifests/m1", data); err != nil {
		t.Errorf("identical Put: %v", err)
	}
	for _, other := range [][]byte{[]byte(`{"manifest":2}`), []byte("short")} {
		if err := b.Put(ctx, "manifests/m1", other); err == nil {
			t.Errorf("Put of %q over %q: want error", other, data)
		}
	}
	for _, r := range f.requests()[n:] {
		if r.Method == http.MethodPut {
			t.Errorf("Put of an existing key uploaded: %s", r.URL)
		}
	}
	for _, r := range f.requests() {
		if !strings.HasPrefix(r.URL.Path, "/st/pinfs/store/manifests/") {
			t.Errorf("%s %s: outside the store prefix", r.Method, r.URL.Path)
		}
	}
	for _, key := range []string{"", "../x", "/abs", "a//b", `a\b`} {
		if err := b.Put(ctx, key, data); err == nil {
			t.Errorf("Put(%q): want error", key)
		}
	}
}

// TestBucketPutRace: the HEAD says "absent", but another writer finishes
// first; the conditional PUT fails and Put compares instead.
func TestBucketPutRace(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("st", "Enabled")
	b := mustBucket(t, c, "st", "")
	for _, tc := range []struct {
		winner string
		ok     bool
	}{{"same", true}, {"different", false}} {
		key := "race-" + tc.winner
		var first atomic.Bool
		first.Store(true)
		f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method == http.MethodHead && first.CompareAndSwap(true, false) {
				f.put("st", key, []byte(tc.winner)) // the other writer
				writeErr(w, r, http.StatusNotFound, "NotFound")
				return true
			}
			return false
		})
		err := b.Put(ctx, key, []byte("same"))
		if (err == nil) != tc.ok {
			t.Errorf("race with %q: Put = %v; want ok=%v", tc.winner, err, tc.ok)
		}
		if got, _ := b.Get(ctx, key); string(got) != tc.winner {
			t.Errorf("race with %q: key holds %q", tc.winner, got)
		}
	}
}

// TestBucketPutOverDeleteMarker: a blob key whose current version is a
// delete marker can be written again, also where the server refuses
// If-None-Match: * over a delete marker.
func TestBucketPutOverDeleteMarker(t *testing.T) {
	for _, markerExists := range []bool{false, true} {
		f, c := newFake(t)
		f.markerExists = markerExists
		f.createBucket("store", "Enabled")
		b := mustBucket(t, c, "store", "")
		f.put("store", "manifests/m", []byte("old"))
		f.deleteKey("store", "manifests/m")
		if err := b.Put(ctx, "manifests/m", []byte("new")); err != nil {
			t.Errorf("markerExists=%v: Put over a delete marker: %v", markerExists, err)
		}
		if got, err := b.Get(ctx, "manifests/m"); err != nil || string(got) != "new" {
			t.Errorf("markerExists=%v: Get = %q, %v", markerExists, got, err)
		}
	}
}

// TestBucketPutWithoutConditionalWrites: a server that answers
// If-None-Match with NotImplemented still gets the blob.
func TestBucketPutWithoutConditionalWrites(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("store", "Enabled")
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPut && r.Header.Get("If-None-Match") != "" {
			writeErr(w, r, http.StatusNotImplemented, "NotImplemented")
			return true
		}
		return false
	})
	b := mustBucket(t, c, "store", "")
	if err := b.Put(ctx, "k", []byte("blob")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "k"); err != nil || string(got) != "blob" {
		t.Errorf("Get = %q, %v", got, err)
	}
}

func TestBucketPutCAS(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("st", "Enabled")
	b := mustBucket(t, c, "st", "pfx")
	data := []byte("member bytes")
	digest := b3.Of(data).String()
	obj, err := b.PutCAS(ctx, digest, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	wantKey := "pfx/cas/blake3/" + b3.Of(data).Hex()
	if obj.Bucket != "st" || obj.Key != wantKey || obj.VersionID == "" || obj.VersionID == "null" || obj.CAS != "" {
		t.Fatalf("PutCAS = %+v; want st/%s at a real version", obj, wantKey)
	}
	if got, err := readRange(c, obj, 0, -1); err != nil || !bytes.Equal(got, data) {
		t.Errorf("read back = %q, %v", got, err)
	}

	// Present with the same size: the reader is not touched, same version.
	again, err := b.PutCAS(ctx, digest, failingReader{}, int64(len(data)))
	if err != nil || again != obj {
		t.Errorf("second PutCAS = %+v, %v; want %+v", again, err, obj)
	}
	// Present with another size: a new version is uploaded.
	f.put("st", wantKey, []byte("short"))
	other, err := b.PutCAS(ctx, digest, bytes.NewReader(data), int64(len(data)))
	if err != nil || other.VersionID == obj.VersionID {
		t.Errorf("PutCAS over a wrong-size blob = %+v, %v; want a new version", other, err)
	}

	if _, err := b.PutCAS(ctx, "blake3:"+strings.Repeat("cd", 32), strings.NewReader("abc"), 4); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short reader: %v; want io.ErrUnexpectedEOF", err)
	}
	if _, err := b.PutCAS(ctx, "blake3:"+strings.Repeat("cd", 32), strings.NewReader("abcde"), 4); err == nil {
		t.Error("long reader: want error")
	}
	if _, err := b.PutCAS(ctx, "sha256:00", strings.NewReader(""), 0); err == nil {
		t.Error("bad digest: want error")
	}
}

func TestBucketPutCASUnversioned(t *testing.T) {
	for _, versioning := range []string{"", "Suspended"} {
		f, c := newFake(t)
		f.createBucket("st", versioning)
		b := mustBucket(t, c, "st", "")
		digest := b3.Of([]byte("abc")).String()
		if obj, err := b.PutCAS(ctx, digest, strings.NewReader("abc"), 3); !errors.Is(err, store.ErrUnversioned) {
			t.Errorf("versioning %q: PutCAS = %+v, %v; want ErrUnversioned", versioning, obj, err)
		}
		// Nor is the (null) version now at that key accepted later.
		if obj, err := b.PutCAS(ctx, digest, strings.NewReader("abc"), 3); !errors.Is(err, store.ErrUnversioned) {
			t.Errorf("versioning %q: second PutCAS = %+v, %v; want ErrUnversioned", versioning, obj, err)
		}
	}
}

// TestCABundle: NewClient's own transport still takes AWS_CA_BUNDLE, so a
// server whose certificate only that bundle vouches for is trusted.
func TestCABundle(t *testing.T) {
	f := &fakeS3{buckets: map[string]*fakeBucket{}, pageSize: 1000}
	f.srv = httptest.NewUnstartedServer(f)
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	isolateAWSEnv(t)
	f.createBucket("data", "Enabled")
	v1 := f.put("data", "k", []byte("over tls"))
	obj := mustVersion(t, "data", "k", v1)

	bundle := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
	if err := os.WriteFile(bundle, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CA_BUNDLE", "")
	// Bounded: the SDK retries the failed handshake with backoff.
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := f.client(t, f.srv.URL).Stat(tctx, obj); err == nil {
		t.Fatal("a self-signed server was trusted without AWS_CA_BUNDLE")
	}
	t.Setenv("AWS_CA_BUNDLE", bundle)
	if got, err := readRange(f.client(t, f.srv.URL), obj, 0, -1); err != nil || string(got) != "over tls" {
		t.Errorf("with AWS_CA_BUNDLE: %q, %v", got, err)
	}
}

func TestNewBucketRefuses(t *testing.T) {
	for _, tc := range []struct{ bucket, prefix string }{
		{"", "p"}, {"a/b", ""}, {"b", "x/../y"}, {"b", "a//b"},
	} {
		if _, err := NewBucket(&Client{}, tc.bucket, tc.prefix); err == nil {
			t.Errorf("NewBucket(%q, %q): want error", tc.bucket, tc.prefix)
		}
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("must not be read") }
