package verify_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
)

// named is a Getter that names its store.
type named struct {
	store
	name string
}

func (n named) String() string { return n.name }

// failing is a Getter whose every Get fails with err.
type failing struct{ err error }

func (f failing) Get(context.Context, string) ([]byte, error) { return nil, f.err }

// sdkError is a one-line store error that keeps a longer cause (store.Detailer).
type sdkError struct{ msg, detail string }

func (e sdkError) Error() string  { return e.msg }
func (e sdkError) Detail() string { return e.detail }
func (e sdkError) Unwrap() error  { return fs.ErrNotExist }

func TestFetchNamesAMissingManifest(t *testing.T) {
	ctx := context.Background()
	d := verify.Digest("sha256:" + strings.Repeat("0f", 32))

	_, err := verify.Fetch(ctx, named{store{}, "s3://pinstore/p"}, d)
	// … and, since the store has a URL, the command that lists the
	// digests it holds.
	if want := "no manifest " + string(d) + " in store s3://pinstore/p; pinfs list --store s3://pinstore/p lists the manifests it holds"; err == nil || err.Error() != want {
		t.Errorf("Fetch from a named store = %v; want %q", err, want)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Fetch error %v does not wrap the store's", err)
	}

	_, err = verify.Fetch(ctx, store{}, d)
	if want := "no manifest " + string(d) + " in the store"; err == nil || err.Error() != want {
		t.Errorf("Fetch from an unnamed store = %v; want %q", err, want)
	}

	// Another failure (a missing bucket, no credentials) is not a missing
	// manifest: its own message stays.
	other := errors.New("bucket nob does not exist")
	_, err = verify.Fetch(ctx, failing{other}, d)
	if want := "manifest " + string(d) + ": bucket nob does not exist"; err == nil || err.Error() != want || !errors.Is(err, other) {
		t.Errorf("Fetch with a missing bucket = %v; want %q", err, want)
	}

	// The store's detail (the SDK error) is kept for --debug and the log.
	_, err = verify.Fetch(ctx, failing{sdkError{"get s3://b/k: not found", "operation error S3: GetObject"}}, d)
	var det interface{ Detail() string }
	if !errors.As(err, &det) || det.Detail() != "get s3://b/k: not found: operation error S3: GetObject" {
		t.Errorf("Fetch error %v: detail %v", err, fmt.Sprint(det))
	}
}
