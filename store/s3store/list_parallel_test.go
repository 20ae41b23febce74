package s3store

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
)

// trickyKeys fills bucket "src" with keys that a delimiter walk could get
// wrong: keys ending in "/" (empty directory markers and one with bytes),
// empty segments, the prefix itself as a key, characters that sort just
// before and after "/", deleted and overwritten keys, and a chain of single
// sub-prefixes deeper than maxLevels.
func trickyKeys(f *fakeS3) {
	f.createBucket("src", "Enabled")
	put := func(key, data string) { f.put("src", key, []byte(data)) }
	for _, k := range []string{
		"p/x", "p/y z", "p/d1/f", "p/d1//g", "p/d1///h", "p//top", "p//", "p/d1.x", "p/d10/a", "p/d1-x/b",
		"p/d2/a/b/c", "p/d2/a/b/d", "p/d3/+%?#&<>é", "p/d4/old", "p/d5/keep",
		"pfx", "pfx/inner", "q/only", "deep/1/2/3/4/5/6/x", "deep/1/2/3/4/5/6/y", "deep/1/2/3/4/5/7",
	} {
		put(k, "bytes of "+k)
	}
	put("p/", "")    // the prefix as a directory marker
	put("p/d1/", "") // a console's "folder"
	put("p/d6/", "a key ending in a slash, with bytes")
	put("p/d6/empty/", "") // a folder holding nothing
	put("p/d4/old", "overwritten")
	f.deleteKey("src", "p/d5/gone")
	put("p/d5/gone", "first")
	f.deleteKey("src", "p/d5/gone") // current version: a delete marker
	put("p/d7/only-deleted", "x")
	f.deleteKey("src", "p/d7/only-deleted")
}

// sequential returns a copy of c that lists without a delimiter.
func sequential(c *Client) *Client {
	s := *c
	s.ListParallel = 1
	return &s
}

// TestListParallelMatchesSequential: on tricky keys, with small pages and
// with or without a server that repeats the last entry of a page, the
// parallel listing of every prefix is the sequential one.
func TestListParallelMatchesSequential(t *testing.T) {
	for _, repeat := range []bool{false, true} {
		for _, pageSize := range []int{2, 3, 1000} {
			t.Run(fmt.Sprintf("repeat=%v/page=%d", repeat, pageSize), func(t *testing.T) {
				f, c := newFake(t)
				trickyKeys(f)
				f.pageSize = pageSize
				serveDelimited(f, repeat)
				for _, prefix := range []string{"p/", "p", "", "p/d1/", "p//", "deep/", "deep/1/2/3/4/5/", "none/", "p/x"} {
					want, err := sequential(c).ListCurrent(ctx, "src", prefix)
					if err != nil {
						t.Fatalf("sequential %q: %v", prefix, err)
					}
					for _, n := range []int{2, 16} {
						c.ListParallel = n
						got, err := c.ListCurrent(ctx, "src", prefix)
						if err != nil || !reflect.DeepEqual(got, want) {
							t.Errorf("parallel(%d) %q = %v, %v\nwant %v", n, prefix, keys(got), err, keys(want))
						}
					}
				}
			})
		}
	}
}

// TestListParallelWalks checks the requests: one versioning check, a
// delimiter listing per level down a chain of single sub-prefixes (at most
// maxLevels), then one sequential listing per sub-prefix.
func TestListParallelWalks(t *testing.T) {
	f, c := newFake(t)
	trickyKeys(f)
	serveDelimited(f, false)
	if _, err := c.ListCurrent(ctx, "src", "p/"); err != nil {
		t.Fatal(err)
	}
	got := listRequests(f)
	want := []string{"versioning", "p/ delim"}
	for _, sub := range []string{"p//", "p/d1-x/", "p/d1/", "p/d10/", "p/d2/", "p/d3/", "p/d4/", "p/d5/", "p/d6/", "p/d7/"} {
		want = append(want, sub)
	}
	if !sameSet(got, want) {
		t.Errorf("requests for p/ = %q; want %q (any order)", got, want)
	}

	n := len(f.requests())
	if _, err := c.ListCurrent(ctx, "src", "deep/"); err != nil {
		t.Fatal(err)
	}
	got = listRequests(f)[n:]
	want = []string{"versioning", "deep/ delim", "deep/1/ delim", "deep/1/2/ delim", "deep/1/2/3/ delim", "deep/1/2/3/4/"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("requests for deep/ = %q; want %q", got, want)
	}
}

// TestListParallelBounded: no more than ListParallel sub-prefixes are
// listed at once, and that many are (the first ones wait for each other).
func TestListParallelBounded(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("src", "Enabled")
	for i := range 12 {
		f.put("src", fmt.Sprintf("p/%02d/k", i), []byte("x"))
	}
	d := serveDelimited(f, false)
	const n = 3
	c.ListParallel = n
	var mu sync.Mutex
	inFlight, most := 0, 0
	all := make(chan struct{})
	release := sync.OnceFunc(func() { close(all) }) // n can be in flight again later
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if q := r.URL.Query(); q.Has("versions") && q.Get("delimiter") == "" {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			if inFlight == n {
				release()
			}
			mu.Unlock()
			select { // the first n wait until n are in flight, so the test fails if fewer ever are
			case <-all:
			case <-time.After(10 * time.Second):
			}
			defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
		}
		return d.hook(w, r)
	})
	got, err := c.ListCurrent(ctx, "src", "p/")
	if err != nil || len(got) != 12 {
		t.Fatalf("ListCurrent = %v, %v; want 12 keys", keys(got), err)
	}
	if most != n {
		t.Errorf("at most %d sub-prefixes listed at once; want %d", most, n)
	}
}

// TestListParallelErrors: a sub-prefix that cannot be listed fails the
// whole listing, naming it; "null" current versions found in several
// sub-prefixes fail it as the sequential listing does.
func TestListParallelErrors(t *testing.T) {
	f, c := newFake(t)
	trickyKeys(f)
	d := serveDelimited(f, true)
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Query().Get("prefix") == "p/d3/" {
			writeErr(w, r, http.StatusForbidden, "AccessDenied")
			return true
		}
		return d.hook(w, r)
	})
	if _, err := c.ListCurrent(ctx, "src", "p/"); err == nil || !strings.Contains(err.Error(), "s3://src/p/d3/") {
		t.Errorf("ListCurrent with a forbidden sub-prefix = %v; want an error naming s3://src/p/d3/", err)
	}

	f, c = newFake(t)
	f.createBucket("old", "")
	f.pageSize = 2
	for _, k := range []string{"p/a/1", "p/a/2", "p/b/1", "p/c"} {
		f.put("old", k, []byte(k))
	}
	f.mu.Lock()
	f.buckets["old"].versioning = "Enabled"
	f.mu.Unlock()
	f.put("old", "p/b/1", []byte("versioned now"))
	serveDelimited(f, true)
	_, want := sequential(c).ListCurrent(ctx, "old", "p/")
	_, err := c.ListCurrent(ctx, "old", "p/")
	if !errors.Is(err, store.ErrUnversioned) || err == nil || want == nil || err.Error() != want.Error() ||
		!strings.Contains(err.Error(), ": 3 current versions") {
		t.Errorf("parallel = %v\nsequential = %v\nwant the same ErrUnversioned naming 3 keys", err, want)
	}
}

// listRequests describes the recorded versioning checks and version
// listings: "versioning", "PREFIX" or "PREFIX delim", pages of one listing
// counted once.
func listRequests(f *fakeS3) []string {
	var out []string
	for _, r := range f.requests() {
		q := r.URL.Query()
		switch {
		case q.Has("versioning"):
			out = append(out, "versioning")
		case q.Has("versions") && q.Get("key-marker") == "":
			s := q.Get("prefix")
			if q.Get("delimiter") != "" {
				s += " delim"
			}
			out = append(out, s)
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	count := map[string]int{}
	for _, s := range a {
		count[s]++
	}
	for _, s := range b {
		count[s]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}

func keys(vs []store.ObjectVersion) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Key+"@"+v.VersionID)
	}
	return out
}

// TestListStalledPages: a server that answers a page with the marker it was
// asked for (versitygw v1.8.0 after a directory object) fails the listing
// instead of looping forever, sequential or not.
func TestListStalledPages(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("src", "Enabled")
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if !r.URL.Query().Has("versions") {
			return false
		}
		writeXML(w, struct {
			XMLName             xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListVersionsResult"`
			IsTruncated         bool
			NextKeyMarker       string
			NextVersionIdMarker string
		}{IsTruncated: true, NextKeyMarker: "p/d1", NextVersionIdMarker: "v1"})
		return true
	})
	for _, n := range []int{1, 16} {
		c.ListParallel = n
		if _, err := c.ListCurrent(ctx, "src", "p/"); err == nil || !strings.Contains(err.Error(), `after "p/d1"/"v1" with itself`) {
			t.Errorf("ListParallel %d: ListCurrent = %v; want an error naming the stalled marker", n, err)
		}
	}
}
