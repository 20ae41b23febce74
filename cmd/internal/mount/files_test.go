package mount

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/metrics"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/blocks"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
	"github.com/pinfs/pinfs/verify/verifytest"
)

// casObjects serves CAS members from memory.
type casObjects map[string][]byte

func (o casObjects) ReadRange(ctx context.Context, obj store.Object, off, length int64) (io.ReadCloser, error) {
	b, ok := o[obj.CAS]
	if !ok || off > int64(len(b)) {
		return nil, store.ErrNotFound
	}
	end := int64(len(b))
	if length >= 0 {
		end = min(end, off+length)
	}
	return io.NopCloser(bytes.NewReader(b[off:end])), nil
}

func (o casObjects) Stat(ctx context.Context, obj store.Object) (store.Info, error) {
	return store.Info{Size: int64(len(o[obj.CAS]))}, nil
}

// outboards encodes the outboard of the one member the tests read.
type outboards []byte

func (b outboards) Outboard(ctx context.Context, d b3.Sum, size int64, fresh bool) ([]byte, error) {
	_, ob, err := b3.Encode(bytes.NewReader(b), size)
	return ob, err
}

// filesOf returns files over a one-member snapshot with data as the member.
func filesOf(t *testing.T, data []byte) *files {
	t.Helper()
	d := b3.Of(data).String()
	ms := []verify.Member{{ID: "m0", Path: "m0.bin", Size: int64(len(data)), Digest: d, CAS: d}}
	snap, err := verifytest.Snapshot(ms, "files test")
	if err != nil {
		t.Fatal(err)
	}
	br, err := blocks.New(blocks.Config{Objects: casObjects{d: data}, Outboards: outboards(data), MemBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { br.Close() })
	return &files{blocks: br, members: snap.Table(), tracker: consumed.NewTracker(snap.Table()), metrics: metrics.New(br), log: slog.Default()}
}

// readSizes returns the count and sum lines of pinfs_read_size_bytes.
func readSizes(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	lines := regexp.MustCompile(`(?m)^pinfs_read_size_bytes_(sum|count).*$`).FindAllString(w.Body.String(), -1)
	return strings.Join(lines, "\n")
}

// TestFilesSlices: Slices serves the bytes ReadAt serves, and records the
// same reads for the consumed set and the metrics.
func TestFilesSlices(t *testing.T) {
	data := make([]byte, 3<<20+777)
	for k := range data {
		data[k] = byte(k*7 + k/4099)
	}
	a, s := filesOf(t, data), filesOf(t, data)
	ctx := context.Background()
	for _, r := range []struct {
		off int64
		n   int
	}{{0, 4096}, {65530, 1 << 20}, {2 << 20, 1 << 20}, {int64(len(data)) - 10, 4096}} {
		p := make([]byte, r.n)
		n, err := a.ReadAt(ctx, 0, p, r.off)
		if err != nil {
			t.Fatalf("ReadAt(%d@%d): %v", r.n, r.off, err)
		}
		sl, got, err := s.Slices(ctx, 0, r.off, r.n)
		if err != nil || got != n || !bytes.Equal(bytes.Join(sl.Vecs(), nil), p[:n]) {
			t.Fatalf("Slices(%d@%d) = %d bytes, %v; want ReadAt's %d bytes", r.n, r.off, got, err, n)
		}
		sl.Release()
		if end := min(r.off+int64(r.n), int64(len(data))); !bytes.Equal(p[:n], data[r.off:end]) {
			t.Fatalf("ReadAt(%d@%d): bytes differ from the member's", r.n, r.off)
		}
	}
	ca, cs := a.tracker.Set(), s.tracker.Set()
	if ca.Opened.GetCardinality() != 1 || !ca.Opened.Equals(cs.Opened) || !ca.Full.Equals(cs.Full) ||
		len(ca.Parts) != 1 || len(cs.Parts) != 1 || !ca.Parts[0].Equals(cs.Parts[0]) {
		t.Errorf("consumed sets differ: ReadAt %v %v %v, Slices %v %v %v", ca.Opened, ca.Full, ca.Parts, cs.Opened, cs.Full, cs.Parts)
	}
	if ma, ms := readSizes(t, a.metrics), readSizes(t, s.metrics); ma != ms || !strings.HasSuffix(ms, "count 4") {
		t.Errorf("read metrics differ: ReadAt\n%s\nSlices\n%s", ma, ms)
	}
}
