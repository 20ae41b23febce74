package verify_test

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/pinfs/pinfs/verify"
)

// cutIndexing is an indexing store whose table streams fail halfway.
type cutIndexing struct{ *indexing }

var errCut = errors.New("the stream was cut off")

func (x cutIndexing) Open(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	rc, n, err := x.indexing.Open(ctx, key)
	if err != nil || n < 2 {
		return rc, n, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(rc, n/2), errReader{}), rc}, n, nil
}

func (x cutIndexing) OpenNoCopy(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	return x.Open(ctx, key)
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errCut }

// TestIndexOfACutStream: a member table whose stream fails halfway while
// it is being indexed (a tier that stalls and is cut off) fails Fetch
// with the stream's error, and leaves no index; it used to panic
// (fileSink.finish of no header).
func TestIndexOfACutStream(t *testing.T) {
	x, m, _ := newIndexing(t, treeMembers())
	c, err := verify.Fetch(context.Background(), cutIndexing{x}, m.SnapshotID)
	if !errors.Is(err, errCut) {
		t.Fatalf("Fetch of a table cut halfway = %v, %v; want its error", c, err)
	}
	ents, _ := os.ReadDir(x.dir)
	for _, e := range ents {
		t.Errorf("an index left behind: %s", e.Name())
	}
}
