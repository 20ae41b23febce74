package s3store

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store"
)

// A blob larger than its kind's limit is refused, naming the key and the
// limit: by its Content-Length before the body is read, and, when the
// answer does not say, once the limit is passed (issue 22, item 8).
func TestGetRefusesOversizedBlob(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("bkt", "Enabled")
	b := mustBucket(t, c, "bkt", "pre")
	const key = "runs/r1/events/e.json"
	body := bytes.Repeat([]byte("x"), store.MaxRecord+1)
	for _, chunked := range []bool{false, true} {
		f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodGet {
				return false
			}
			if !chunked {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			}
			w.WriteHeader(http.StatusOK)
			w.Write(body)
			return true
		})
		gets := map[string]func() error{
			"Get":  func() error { _, err := b.Get(ctx, key); return err },
			"Load": func() error { _, _, err := b.Load(ctx, key); return err },
		}
		if !chunked { // a stream of unknown length is bounded by its reader
			gets["Open"] = func() error {
				rc, _, err := b.Open(ctx, key)
				if err == nil {
					rc.Close()
				}
				return err
			}
		}
		for name, get := range gets {
			err := get()
			if !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), "s3://bkt/pre/"+key) || !strings.Contains(err.Error(), "16 MiB") {
				t.Errorf("%s of 16 MiB + 1 (chunked %v): %v; want it refused naming the key and 16 MiB", name, chunked, err)
			}
		}
	}
}
