package s3store

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/b3"
)

// countPuts returns how many object writes reqs holds.
func countPuts(reqs []*http.Request) int {
	n := 0
	for _, r := range reqs {
		if r.Method == http.MethodPut || r.Method == http.MethodPost {
			n++
		}
	}
	return n
}

// TestBucketPutCASReplacesBadBlobOfRightSize: an existing CAS blob is not
// trusted by its size. A current version of the right size but other bytes
// gets a new version, which is the one returned; a good one is returned
// without reading the caller's bytes.
func TestBucketPutCASReplacesBadBlobOfRightSize(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("st", "Enabled")
	b := mustBucket(t, c, "st", "pfx")
	data := []byte("member bytes")
	d := b3.Of(data)
	k := "pfx/cas/blake3/" + d.Hex()
	bad := f.put("st", k, []byte("MEMBER BYTES"))
	obj, err := b.PutCAS(ctx, d.String(), bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if obj.Key != k || obj.VersionID == bad {
		t.Fatalf("PutCAS over a bad blob of the right size = %+v; want a new version of %s", obj, k)
	}
	if got, err := readRange(c, obj, 0, -1); err != nil || !bytes.Equal(got, data) {
		t.Errorf("returned version holds %q, %v; want %q", got, err, data)
	}
	again, err := b.PutCAS(ctx, d.String(), failingReader{}, int64(len(data)))
	if err != nil || again != obj {
		t.Errorf("PutCAS over the good version = %+v, %v; want %+v without reading", again, err, obj)
	}
}

// TestBucketPutCASRefusesBytesOfAnotherDigest: bytes that do not hash to
// the digest are not uploaded, whether the key is free or holds a bad blob.
func TestBucketPutCASRefusesBytesOfAnotherDigest(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("st", "Enabled")
	b := mustBucket(t, c, "st", "")
	d := b3.Of([]byte("the pinned bytes"))
	k := "cas/blake3/" + d.Hex()
	if _, err := b.PutCAS(ctx, d.String(), strings.NewReader("the pinned bytez"), 16); !errors.Is(err, b3.ErrMismatch) {
		t.Fatalf("PutCAS of bytes of another digest = %v; want b3.ErrMismatch", err)
	}
	if _, err := b.headBlob(ctx, k); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused PutCAS left an object: %v", err)
	}
	f.put("st", k, []byte("a bad blob, 16 b"))
	before := countPuts(f.requests())
	if _, err := b.PutCAS(ctx, d.String(), strings.NewReader("the pinned bytez"), 16); !errors.Is(err, b3.ErrMismatch) {
		t.Fatalf("PutCAS of bytes of another digest over a bad blob = %v; want b3.ErrMismatch", err)
	}
	if n := countPuts(f.requests()) - before; n != 0 {
		t.Errorf("a refused PutCAS sent %d writes", n)
	}
}

// TestRealPutCASVerifies, against versitygw: a multipart upload whose bytes
// do not hash to the digest is aborted and leaves nothing, and a bad blob
// of the right size (one part or several) is replaced by a new version.
func TestRealPutCASVerifies(t *testing.T) {
	srv, c := startReal(t)
	srv.CreateBucket(t, "pinstore", true)
	b := mustBucket(t, c, "pinstore", "")
	b.partSize = 5 << 20 // S3's minimum
	data := make([]byte, 2*b.partSize+12345)
	for i := range data {
		data[i] = byte(i * 7 / 13)
	}
	other := bytes.Clone(data)
	other[len(other)-1] ^= 1
	want := b3.Of(other)
	if _, err := b.PutCAS(ctx, want.String(), bytes.NewReader(data), int64(len(data))); !errors.Is(err, b3.ErrMismatch) {
		t.Fatalf("multipart PutCAS of bytes of another digest = %v; want b3.ErrMismatch", err)
	}
	if _, err := b.headBlob(ctx, "cas/blake3/"+want.Hex()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused upload left an object: %v", err)
	}
	out, err := srv.Client(t).ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("pinstore")})
	if err != nil || len(out.Uploads) != 0 {
		t.Errorf("uploads left open: %+v, %v", out, err)
	}

	for _, good := range [][]byte{[]byte("small member"), data} {
		d := b3.Of(good)
		k := "cas/blake3/" + d.Hex()
		bad := bytes.Clone(good)
		bad[0] ^= 0xff
		badID := srv.Put(t, "pinstore", k, bad)
		obj, err := b.PutCAS(ctx, d.String(), bytes.NewReader(good), int64(len(good)))
		if err != nil {
			t.Fatal(err)
		}
		if obj.VersionID == badID {
			t.Fatalf("%d bytes: PutCAS returned the bad version %s", len(good), badID)
		}
		if got := srv.Get(t, "pinstore", k, obj.VersionID); !bytes.Equal(got, good) {
			t.Errorf("%d bytes: the returned version does not hold the pinned bytes", len(good))
		}
		if again, err := b.PutCAS(ctx, d.String(), failingReader{}, int64(len(good))); err != nil || again != obj {
			t.Errorf("%d bytes: PutCAS over the good version = %+v, %v; want %+v", len(good), again, err, obj)
		}
	}
}
