package metrics

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pinfs/pinfs/fs"
)

type fakePassthrough struct{ opens atomic.Int64 }

func (f *fakePassthrough) Status() fs.PassthroughStatus {
	n := f.opens.Load()
	return fs.PassthroughStatus{Enabled: true, Opens: n, Bytes: 1000 * n}
}

func TestWatchPassthrough(t *testing.T) {
	m := New(&fakeSource{}, "digest", "b3:abc")
	p := &fakePassthrough{}
	p.opens.Store(3)
	m.WatchPassthrough(p)
	want := `# HELP pinfs_passthrough_bytes_total Sum of the sizes of the members of passthrough opens (each counts as read in full).
# TYPE pinfs_passthrough_bytes_total counter
pinfs_passthrough_bytes_total{digest="b3:abc"} 3000
# HELP pinfs_passthrough_opens_total Opens the kernel served from a verified cache file (FUSE passthrough); their reads never reach the daemon.
# TYPE pinfs_passthrough_opens_total counter
pinfs_passthrough_opens_total{digest="b3:abc"} 3
`
	names := []string{"pinfs_passthrough_opens_total", "pinfs_passthrough_bytes_total"}
	url := serve(t, m) + "/metrics"
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	p.opens.Store(4) // read at scrape time
	want = strings.Replace(strings.Replace(want, "} 3000", "} 4000", 1), "} 3\n", "} 4\n", 1)
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
}
