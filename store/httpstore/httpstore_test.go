package httpstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/tier"
	"github.com/pinfs/pinfs/verify/b3"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// fakeTier serves member (as blocks of digest hx) and one manifest; it
// flips a manifest byte unless bypassed when flip is set.
func fakeTier(t *testing.T, member, manifest []byte, manifestKey string, flip bool, seen *[]string) *Store {
	t.Helper()
	var mu sync.Mutex // requests come in parallel; seen is read once they are answered
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		*seen = append(*seen, r.URL.Path+" bypass="+r.Header.Get(tier.BypassHeader))
		mu.Unlock()
		p := strings.TrimPrefix(r.URL.Path, "/")
		if p == manifestKey {
			b := bytes.Clone(manifest)
			if flip && r.Header.Get(tier.BypassHeader) != "1" {
				b[0] ^= 1
			}
			w.Write(b)
			return
		}
		if strings.HasPrefix(p, "blocks/blake3/") {
			i, _ := strconv.ParseInt(p[strings.LastIndexByte(p, '/')+1:], 10, 64)
			start := i * tier.BlockSize
			end := min(start+tier.BlockSize, int64(len(member)))
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(member[start:end]))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	s, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReadContentRanges(t *testing.T) {
	member := make([]byte, 3*tier.BlockSize+100)
	for i := range member {
		member[i] = byte(i * 7)
	}
	var seen []string
	s := fakeTier(t, member, []byte("m"), "manifests/sha256/"+strings.Repeat("c", 64), false, &seen)
	c := store.Content{Digest: "blake3:" + strings.Repeat("a", 64), Size: int64(len(member)), Snapshot: "sha256:" + strings.Repeat("b", 64)}
	for _, r := range [][2]int64{{5, 3*tier.BlockSize + 10}, {0, tier.BlockSize}, {tier.BlockSize - 1, 2}, {0, -1}} {
		rc, err := s.ReadContent(context.Background(), c, r[0], r[1], true)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		end := r[0] + r[1]
		if r[1] < 0 {
			end = int64(len(member))
		}
		if err != nil || !bytes.Equal(got, member[r[0]:end]) {
			t.Fatalf("ReadContent%v: %d bytes, %v; want the member's", r, len(got), err)
		}
	}
	for _, l := range seen {
		if !strings.HasSuffix(l, "bypass=1") {
			t.Fatalf("fresh request without the bypass header: %s", l)
		}
	}
}

func TestGetHealsAndKeys(t *testing.T) {
	d, manifest, _ := verifytest.Table(3, verifytest.S3, 1)
	key := "manifests/sha256/" + d.Hex()
	var seen []string
	s := fakeTier(t, nil, manifest, key, true, &seen)
	got, err := s.Get(context.Background(), key)
	if err != nil || !bytes.Equal(got, manifest) || len(seen) != 2 {
		t.Fatalf("Get = %q, %v after %v; want the manifest after one bypassing retry", got, err, seen)
	}
	if _, err := s.Get(context.Background(), "gates/x/head"); !errors.Is(err, store.ErrNotFound) || len(seen) != 2 {
		t.Fatalf("Get(gates/x/head) = %v after %v; want ErrNotFound, no request", err, seen)
	}
	other := "manifests/sha256/" + strings.Repeat("0", 64)
	if _, err := s.Get(context.Background(), other); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get(unknown) = %v; want ErrNotFound", err)
	}
	_ = b3.ErrMismatch
}
