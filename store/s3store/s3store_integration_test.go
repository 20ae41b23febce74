package s3store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/pinfs/pinfs/integration/s3test"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/b3"
)

// startReal runs versitygw (integration/s3test) and returns it with a
// Client made by NewClient from the server's environment, as the pinfs
// binary would be.
func startReal(t testing.TB) (*s3test.Server, *Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("real S3 server; not in -short")
	}
	srv := s3test.Start(t)
	isolateAWSEnv(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	c, err := NewClient(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

func TestRealListCurrent(t *testing.T) {
	srv, c := startReal(t)
	srv.CreateBucket(t, "src", true)
	srv.Put(t, "src", "data/a", []byte("a, first"))
	a2 := srv.Put(t, "src", "data/a", []byte("a, overwritten"))
	b1 := srv.Put(t, "src", "data/b", []byte("b"))
	srv.Put(t, "src", "data/gone", []byte("deleted later"))
	deleteKey(t, srv, "src", "data/gone")
	srv.Put(t, "src", "data/dir/", nil) // a console's "folder"
	d1 := srv.Put(t, "src", "data/dir/d", []byte("dddd"))
	srv.Put(t, "src", "elsewhere", []byte("not under the prefix"))

	got, err := c.ListCurrent(ctx, "src", "data/")
	if err != nil {
		t.Fatal(err)
	}
	want := []store.ObjectVersion{
		{Key: "data/a", VersionID: a2, Size: 14},
		{Key: "data/b", VersionID: b1, Size: 1},
		{Key: "data/dir/d", VersionID: d1, Size: 4},
	}
	if len(got) != len(want) {
		t.Fatalf("ListCurrent = %+v; want %+v", got, want)
	}
	for i := range want {
		if g := got[i]; g.Key != want[i].Key || g.VersionID != want[i].VersionID || g.Size != want[i].Size || g.ETag == "" {
			t.Errorf("entry %d = %+v; want %+v with an ETag", i, g, want[i])
		}
	}
}

func TestRealListCurrentRefusesUnversioned(t *testing.T) {
	srv, c := startReal(t)
	srv.CreateBucket(t, "plain", false)
	srv.Put(t, "plain", "k", []byte("x"))
	if _, err := c.ListCurrent(ctx, "plain", ""); !errors.Is(err, store.ErrUnversioned) || !strings.Contains(err.Error(), "plain") {
		t.Errorf("ListCurrent(unversioned) = %v; want ErrUnversioned naming the bucket", err)
	}

	// Objects written before versioning was enabled keep the "null" version.
	srv.CreateBucket(t, "late", false)
	srv.Put(t, "late", "old/1", []byte("x"))
	srv.Put(t, "late", "old/2", []byte("y"))
	setVersioning(t, srv, "late", types.BucketVersioningStatusEnabled)
	fresh := srv.Put(t, "late", "new/1", []byte("z"))
	_, err := c.ListCurrent(ctx, "late", "")
	if !errors.Is(err, store.ErrUnversioned) || !strings.Contains(err.Error(), "old/1, old/2") {
		t.Errorf("ListCurrent(null versions) = %v; want ErrUnversioned naming old/1, old/2", err)
	}
	if got, err := c.ListCurrent(ctx, "late", "new/"); err != nil || len(got) != 1 || got[0].VersionID != fresh {
		t.Errorf("ListCurrent(new/) = %+v, %v; want new/1 at %s", got, err, fresh)
	}

	setVersioning(t, srv, "late", types.BucketVersioningStatusSuspended)
	if _, err := c.ListCurrent(ctx, "late", "new/"); !errors.Is(err, store.ErrUnversioned) {
		t.Errorf("ListCurrent(suspended) = %v; want ErrUnversioned", err)
	}
	if _, err := c.ListCurrent(ctx, "nobucket", ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ListCurrent(nobucket) = %v; want ErrNotFound", err)
	}
}

func TestRealReadPinnedVersion(t *testing.T) {
	srv, c := startReal(t)
	srv.CreateBucket(t, "data", true)
	old := []byte("0123456789 the pinned bytes")
	v1 := srv.Put(t, "data", "dir/file", old)
	v2 := srv.Put(t, "data", "dir/file", []byte("overwritten with other bytes"))
	obj := mustVersion(t, "data", "dir/file", v1)

	for _, tc := range []struct{ off, length int64 }{{0, -1}, {0, 10}, {11, 3}, {11, -1}, {26, 1}, {27, -1}} {
		want := old[tc.off:]
		if tc.length >= 0 {
			want = want[:tc.length]
		}
		if got, err := readRange(c, obj, tc.off, tc.length); err != nil || !bytes.Equal(got, want) {
			t.Errorf("ReadRange(%d, %d) = %q, %v; want %q", tc.off, tc.length, got, err, want)
		}
	}
	if _, err := readRange(c, obj, 28, -1); err == nil {
		t.Error("ReadRange beyond the end: want error")
	}
	if got, err := readRange(c, obj, 20, 10); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("ReadRange past the end = %q, %v; want io.ErrUnexpectedEOF", got, err)
	}
	info, err := c.Stat(ctx, obj)
	if err != nil || info.Size != int64(len(old)) || info.ETag == "" {
		t.Errorf("Stat = %+v, %v", info, err)
	}

	// A deleted version is gone for good, even though the key still exists.
	srv.DeleteVersion(t, "data", "dir/file", v1)
	if _, err := readRange(c, obj, 0, -1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ReadRange(deleted version) = %v; want ErrNotFound", err)
	}
	if _, err := c.Stat(ctx, obj); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Stat(deleted version) = %v; want ErrNotFound", err)
	}
	if got, err := readRange(c, mustVersion(t, "data", "dir/file", v2), 0, 11); err != nil || string(got) != "overwritten" {
		t.Errorf("ReadRange(v2) = %q, %v", got, err)
	}

	// A version id of the right form that never existed, a key that never
	// existed, and a delete marker's version id.
	marker := deleteKey(t, srv, "data", "dir/file")
	for _, o := range []store.Object{
		mustVersion(t, "data", "dir/file", "01KB0000000000000000000000"),
		mustVersion(t, "data", "no/such/key", v2),
		mustVersion(t, "data", "dir/file", marker),
	} {
		if _, err := readRange(c, o, 0, -1); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("ReadRange(%v) = %v; want ErrNotFound", o, err)
		}
		if _, err := c.Stat(ctx, o); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Stat(%v) = %v; want ErrNotFound", o, err)
		}
	}
}

func TestRealAccessDenied(t *testing.T) {
	srv, _ := startReal(t)
	srv.CreateBucket(t, "data", true)
	v1 := srv.Put(t, "data", "k", []byte("x"))
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
	c, err := NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, mustVersion(t, "data", "k", v1)); !errors.Is(err, store.ErrAccessDenied) {
		t.Errorf("Stat with a wrong secret = %v; want ErrAccessDenied", err)
	}
	if _, err := c.ListCurrent(ctx, "data", ""); !errors.Is(err, store.ErrAccessDenied) {
		t.Errorf("ListCurrent with a wrong secret = %v; want ErrAccessDenied", err)
	}
}

func TestRealBucketStore(t *testing.T) {
	srv, c := startReal(t)
	srv.CreateBucket(t, "pinstore", true)
	b := mustBucket(t, c, "pinstore", "pinfs")
	if _, err := b.Get(ctx, "manifests/m"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(missing) = %v; want ErrNotFound", err)
	}
	if err := b.Put(ctx, "manifests/m", []byte("manifest")); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "manifests/m", []byte("manifest")); err != nil {
		t.Errorf("identical Put: %v", err)
	}
	if err := b.Put(ctx, "manifests/m", []byte("MANIFEST")); err == nil {
		t.Error("conflicting Put: want error")
	}
	if got, err := b.Get(ctx, "manifests/m"); err != nil || string(got) != "manifest" {
		t.Errorf("Get = %q, %v", got, err)
	}
	// versitygw fails If-None-Match: * over a delete marker; Put copes.
	deleteKey(t, srv, "pinstore", "pinfs/manifests/m")
	if err := b.Put(ctx, "manifests/m", []byte("again")); err != nil {
		t.Errorf("Put over a delete marker: %v", err)
	}

	data := []byte("member bytes stored by content")
	digest := b3.Of(data).String()
	obj, err := b.PutCAS(ctx, digest, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	wantKey := "pinfs/cas/blake3/" + b3.Of(data).Hex()
	if obj.Bucket != "pinstore" || obj.Key != wantKey || obj.Validate() != nil {
		t.Fatalf("PutCAS = %+v; want pinstore/%s at a real version", obj, wantKey)
	}
	if got := srv.Get(t, "pinstore", wantKey, obj.VersionID); !bytes.Equal(got, data) {
		t.Errorf("server has %q at the returned version", got)
	}
	if got, err := readRange(c, obj, 7, 5); err != nil || string(got) != "bytes" {
		t.Errorf("ReadRange(PutCAS member) = %q, %v", got, err)
	}
	again, err := b.PutCAS(ctx, digest, failingReader{}, int64(len(data)))
	if err != nil || again != obj {
		t.Errorf("second PutCAS = %+v, %v; want %+v without reading", again, err, obj)
	}
}

// TestRealPutCASMultipart uploads a member in three parts.
func TestRealPutCASMultipart(t *testing.T) {
	srv, c := startReal(t)
	srv.CreateBucket(t, "pinstore", true)
	b := mustBucket(t, c, "pinstore", "")
	b.partSize = 5 << 20 // S3's minimum
	data := make([]byte, 2*b.partSize+12345)
	for i := range data {
		data[i] = byte(i * 7 / 13)
	}
	obj, err := b.PutCAS(ctx, b3.Of(data).String(), bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readRange(c, obj, 0, -1); err != nil || !bytes.Equal(got, data) {
		t.Errorf("multipart member read back: %d bytes, %v; want %d", len(got), err, len(data))
	}
	// A reader that is short fails and leaves no member behind.
	short := "blake3:" + strings.Repeat("c3", 32)
	if _, err := b.PutCAS(ctx, short, bytes.NewReader(data[:b.partSize+1]), int64(len(data))); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short multipart reader: %v; want io.ErrUnexpectedEOF", err)
	}
	if _, err := b.headBlob(ctx, "cas/blake3/"+strings.Repeat("c3", 32)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("failed upload left an object: %v", err)
	}
	out, err := srv.Client(t).ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("pinstore")})
	if err != nil || len(out.Uploads) != 0 {
		t.Errorf("uploads left open: %+v, %v", out, err)
	}
}

func TestRealPutCASUnversioned(t *testing.T) {
	srv, c := startReal(t)
	srv.CreateBucket(t, "plain", false)
	b := mustBucket(t, c, "plain", "")
	if obj, err := b.PutCAS(ctx, b3.Of([]byte("abc")).String(), strings.NewReader("abc"), 3); !errors.Is(err, store.ErrUnversioned) {
		t.Errorf("PutCAS into an unversioned bucket = %+v, %v; want ErrUnversioned", obj, err)
	}
}

// deleteKey deletes bucket/key without a version (a delete marker in a
// versioned bucket) and returns the marker's version id.
func deleteKey(t *testing.T, srv *s3test.Server, bucket, key string) string {
	t.Helper()
	out, err := srv.Client(t).DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("delete %s/%s: %v", bucket, key, err)
	}
	return aws.ToString(out.VersionId)
}

func setVersioning(t *testing.T, srv *s3test.Server, bucket string, status types.BucketVersioningStatus) {
	t.Helper()
	_, err := srv.Client(t).PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket:                  aws.String(bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: status},
	})
	if err != nil {
		t.Fatalf("set versioning of %s to %s: %v", bucket, status, err)
	}
}
