package s3store

import (
	"bytes"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestRealListParallel compares the parallel listing with the sequential
// one on versitygw: directory objects, keys with spaces and characters that
// need escaping, characters sorting around "/", overwritten and deleted
// keys, a chain of single sub-prefixes, and sub-prefixes of more than one
// page (versitygw repeats the last version of a page on the next one).
// versitygw's posix backend stores "a//b" as "a/b" and cannot hold both
// "k" and "k/x", so those are the fake's to test
// (TestListParallelMatchesSequential).
func TestRealListParallel(t *testing.T) {
	srv, c := startReal(t)
	srv.CreateBucket(t, "src", true)
	cl := srv.Client(t)
	put := func(key string, data []byte) {
		if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("src"), Key: aws.String(key), Body: bytes.NewReader(data)}); err != nil {
			t.Errorf("put %q: %v", key, err)
		}
	}
	for _, k := range []string{
		"p/x", "p/y z", "p/d1/f", "p/d1.x", "p/d1-x/b", "p/d10/a", "p/d2/a/b/c", "p/d2/a/b/d",
		"p/d3/+%?#&<>é", "p/d4/old", "p/d5/gone", "pfx", "deep/1/2/3/4/5/6/x", "deep/1/2/3/4/5/7",
	} {
		put(k, []byte("bytes of "+k))
	}
	for _, k := range []string{"p/", "p/d1/", "p/d6/", "p/d6/empty/"} {
		put(k, nil) // directory objects
	}
	put("p/d4/old", []byte("overwritten"))
	deleteKey(t, srv, "src", "p/d5/gone")

	// Three sub-prefixes of 1,100 keys each: listings of several pages.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for d := range 3 {
		for i := range 1100 {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				put(fmt.Sprintf("big/%d/%04d", d, i), []byte{byte(i)})
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// The server honours Delimiter, so the walk does split the listing.
	l := &listing{api: c.api, bucket: "src"}
	if subs, err := l.pages(ctx, "big/", delimiter); err != nil || !reflect.DeepEqual(subs, []string{"big/0/", "big/1/", "big/2/"}) || len(l.list) != 0 {
		t.Errorf("delimited listing of big/ = %q, %v, %d versions; want 3 sub-prefixes and no version", subs, err, len(l.list))
	}

	for _, prefix := range []string{"p/", "p", "", "p/d1/", "deep/", "big/", "big/1/", "none/"} {
		want, err := sequential(c).ListCurrent(ctx, "src", prefix)
		if err != nil {
			t.Fatalf("sequential %q: %v", prefix, err)
		}
		if prefix == "big/" && len(want) != 3300 {
			t.Errorf("sequential big/ lists %d keys; want 3300", len(want))
		}
		for _, n := range []int{2, 16} {
			c.ListParallel = n
			got, err := c.ListCurrent(ctx, "src", prefix)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("parallel(%d) %q = %d keys, %v; want the %d of the sequential listing\ngot  %v\nwant %v",
					n, prefix, len(got), err, len(want), head(keys(got)), head(keys(want)))
			}
		}
	}
}

// head keeps a failure message short.
func head(s []string) []string {
	return s[:min(len(s), 30)]
}
