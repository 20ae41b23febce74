package fallback

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store/httpstore"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// stallingTier is an httpstore in front of a tier that serves blobs
// whole, except those of keys for which stall says true: it sends their
// header and first half, then nothing until the request or the test ends.
func stallingTier(t *testing.T, blobs map[string][]byte, stall func(key string) bool) *httpstore.Store {
	t.Helper()
	quit := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/")
		b, ok := blobs[key]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		if !stall(key) {
			w.Write(b)
			return
		}
		w.Write(b[:len(b)/2])
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-quit:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(quit) }) // runs first: the handlers end, then Close
	st, err := httpstore.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestStalledMetadataReadFromTheFallback: a mount's metadata reads
// (verify.Load: the manifest by Get, the member table streamed by Open)
// through a tier that stalls a body are served by the fallback store,
// within the stall timeout (set through the fallback store, which passes
// it on), instead of hanging: a stalled manifest, and a table that stalls
// halfway, whose stream goes on from the fallback where it stopped
// (issue 37, finding 5).
func TestStalledMetadataReadFromTheFallback(t *testing.T) {
	d, manifest, table := verifytest.Table(50, verifytest.S3, 7)
	sum := sha256.Sum256(table)
	blobs := map[string][]byte{
		verify.ManifestKey(d):                          manifest,
		"members/sha256/" + hex.EncodeToString(sum[:]): table,
	}
	local, err := localstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for k, b := range blobs {
		if err := local.Put(context.Background(), k, b); err != nil {
			t.Fatal(err)
		}
	}
	for name, stall := range map[string]func(string) bool{
		"manifest": func(k string) bool { return strings.HasPrefix(k, "manifests/") },
		"table":    func(k string) bool { return strings.HasPrefix(k, "members/") },
	} {
		t.Run(name, func(t *testing.T) {
			s := New(stallingTier(t, blobs, stall), local, nil)
			s.SetTimeouts(100*time.Millisecond, time.Hour)
			done := make(chan error, 1)
			go func() {
				snap, err := verify.Load(context.Background(), s, d)
				if err == nil && snap.Table().Len() != 50 {
					err = fmt.Errorf("a snapshot of %d members, want 50", snap.Table().Len())
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("verify.Load through a tier that stalls the %s: %v", name, err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("verify.Load through a tier that stalls the %s has not returned after 20 s", name)
			}
			if s.Served() == 0 {
				t.Fatal("the fallback served nothing")
			}
		})
	}
}
