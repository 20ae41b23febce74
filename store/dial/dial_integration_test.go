package dial

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/integration/s3test"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/b3"
)

// realS3 runs versitygw and points the AWS environment at it.
func realS3(t *testing.T) *s3test.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("real S3 server; not in -short")
	}
	srv := s3test.Start(t)
	none := filepath.Join(t.TempDir(), "none")
	t.Setenv("AWS_CONFIG_FILE", none)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", none)
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_SESSION_TOKEN", "")
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return srv
}

func readString(t *testing.T, s store.ObjectReader, obj store.Object) string {
	t.Helper()
	rc, err := s.ReadRange(ctx, obj, 0, -1)
	if err != nil {
		t.Fatalf("ReadRange(%v): %v", obj, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("ReadRange(%v): %v", obj, err)
	}
	return string(b)
}

// TestRealStores: an S3 store and a local store both read a source member
// by version after it was overwritten, and the S3 store keeps its blobs and
// CAS members in its bucket.
func TestRealStores(t *testing.T) {
	srv := realS3(t)
	srv.CreateBucket(t, "source", true)
	srv.CreateBucket(t, "pinstore", true)
	v1 := srv.Put(t, "source", "train/0001.parquet", []byte("pinned rows"))
	srv.Put(t, "source", "train/0001.parquet", []byte("rows written later"))

	lister, err := OpenLister(ctx)
	if err != nil {
		t.Fatal(err)
	}
	list, err := lister.ListCurrent(ctx, "source", "train/")
	if err != nil || len(list) != 1 || list[0].VersionID == v1 {
		t.Fatalf("ListCurrent = %+v, %v; want only the newer version", list, err)
	}
	member, err := store.NewVersion("source", "train/0001.parquet", v1)
	if err != nil {
		t.Fatal(err)
	}

	s3s, err := Open(ctx, "s3://pinstore/snapshots")
	if err != nil {
		t.Fatal(err)
	}
	local, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []store.Store{s3s, local} {
		if got := readString(t, s, member); got != "pinned rows" {
			t.Errorf("%s: member = %q; want the pinned version", s, got)
		}
		if err := s.Put(ctx, "manifests/m", []byte("manifest")); err != nil {
			t.Errorf("%s: Put: %v", s, err)
		}
		obj, err := s.PutCAS(ctx, b3.Of([]byte("local file")).String(), strings.NewReader("local file"), 10)
		if err != nil {
			t.Fatalf("%s: PutCAS: %v", s, err)
		}
		if got := readString(t, s, obj); got != "local file" {
			t.Errorf("%s: CAS member = %q", s, got)
		}
	}
	if got := srv.Get(t, "pinstore", "snapshots/manifests/m", ""); string(got) != "manifest" {
		t.Errorf("S3 store blob on the server = %q", got)
	}
}
