package s3test

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func TestServer(t *testing.T) {
	s := Start(t)
	ctx := context.Background()
	c := s.Client(t)

	s.CreateBucket(t, "vers", true)
	s.CreateBucket(t, "plain", false)

	v1 := s.Put(t, "vers", "dir/key", []byte("first version"))
	v2 := s.Put(t, "vers", "dir/key", []byte("second version, longer"))
	if v1 == "" || v2 == "" || v1 == v2 {
		t.Fatalf("version ids %q, %q: want two distinct non-empty ids", v1, v2)
	}
	t.Logf("version ids: %s %s", v1, v2)
	if got := string(s.Get(t, "vers", "dir/key", v1)); got != "first version" {
		t.Errorf("v1 = %q", got)
	}
	if got := string(s.Get(t, "vers", "dir/key", v2)); got != "second version, longer" {
		t.Errorf("v2 = %q", got)
	}

	// Behaviours pinfs relies on or must cope with.
	out, err := c.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String("vers"), Key: aws.String("dir/key"),
		VersionId: aws.String(v1), Range: aws.String("bytes=6-12"),
	})
	if err != nil {
		t.Fatalf("ranged get: %v", err)
	}
	body, _ := io.ReadAll(out.Body)
	out.Body.Close()
	t.Logf("ranged GET @v1: body %q, VersionId %q, ContentRange %q", body, aws.ToString(out.VersionId), aws.ToString(out.ContentRange))
	if string(body) != "version" || aws.ToString(out.VersionId) != v1 {
		t.Errorf("ranged get @v1 = %q, VersionId %q", body, aws.ToString(out.VersionId))
	}
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("vers"), Key: aws.String("dir/key"), VersionId: aws.String(v1)})
	if err != nil {
		t.Fatalf("head: %v", err)
	}
	t.Logf("HEAD @v1: VersionId %q, ETag %q, size %d", aws.ToString(head.VersionId), aws.ToString(head.ETag), aws.ToInt64(head.ContentLength))

	if id := s.Put(t, "plain", "k", []byte("unversioned")); id != "" {
		t.Logf("unversioned PUT returned version id %q", id)
	}
	lv, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("plain")})
	if err != nil {
		t.Fatalf("list versions (plain): %v", err)
	}
	if len(lv.Versions) != 1 || aws.ToString(lv.Versions[0].VersionId) != "null" {
		t.Errorf("unversioned bucket: ListObjectVersions = %+v, want one version \"null\"", lv.Versions)
	}
	pout, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("plain"), Key: aws.String("k")})
	if err != nil {
		t.Fatalf("get plain: %v", err)
	}
	pout.Body.Close()
	t.Logf("plain GET: VersionId %q", aws.ToString(pout.VersionId))

	// VersionPath: the noncurrent v1 is a file holding exactly its bytes;
	// corrupting it is visible through S3.
	p1 := s.VersionPath(t, "vers", "dir/key", v1)
	t.Logf("v1 at %s", p1)
	if b, err := os.ReadFile(p1); err != nil || string(b) != "first version" {
		t.Fatalf("file of v1 = %q, %v", b, err)
	}
	p2 := s.VersionPath(t, "vers", "dir/key", v2)
	if b, err := os.ReadFile(p2); err != nil || string(b) != "second version, longer" {
		t.Fatalf("file of v2 (%s) = %q, %v", p2, b, err)
	}
	if pp := s.VersionPath(t, "plain", "k", "null"); pp == "" {
		t.Fatal("no path for null version")
	}
	if err := os.WriteFile(p1, []byte("FIRST version"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := s.Get(t, "vers", "dir/key", v1); !bytes.Equal(got, []byte("FIRST version")) {
		t.Errorf("after corrupting at rest, v1 = %q", got)
	}

	// Deleting the current version makes v1 current again, at a new path.
	s.DeleteVersion(t, "vers", "dir/key", v2)
	if got := string(s.Get(t, "vers", "dir/key", "")); got != "FIRST version" {
		t.Errorf("current after deleting v2 = %q", got)
	}
	if p := s.VersionPath(t, "vers", "dir/key", v1); p == p1 {
		t.Errorf("v1 still at %s after it became current", p)
	}
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("vers"), Key: aws.String("dir/key"), VersionId: aws.String(v2)})
	if err == nil {
		t.Errorf("get deleted version succeeded")
	}

	// Stop: the endpoint refuses connections; Restart brings it back.
	s.Stop()
	s.Stop()
	addr := s.Endpoint[len("http://"):]
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatalf("%s still accepts connections after Stop", addr)
	}
	s.Restart(t)
	if got := string(s.Get(t, "vers", "dir/key", v1)); got != "FIRST version" {
		t.Errorf("after restart v1 = %q", got)
	}
}

func TestFindBinaryHonoursEnv(t *testing.T) {
	t.Setenv("VERSITYGW", "/nonexistent/versitygw")
	if p, err := findBinary(); err == nil {
		t.Fatalf("findBinary with a missing $VERSITYGW = %q, want error", p)
	}
}
