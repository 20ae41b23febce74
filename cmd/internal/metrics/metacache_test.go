package metrics

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pinfs/pinfs/store/metacache"
)

type fakeMetaCache struct{ errs atomic.Int64 }

func (f *fakeMetaCache) Stats() metacache.Stats { return metacache.Stats{WriteErrors: f.errs.Load()} }

func TestWatchMetaCache(t *testing.T) {
	m := New(&fakeSource{}, "digest", "b3:abc")
	mc := &fakeMetaCache{}
	mc.errs.Store(3)
	m.WatchMetaCache(mc)
	want := `# HELP pinfs_meta_cache_write_errors_total Verified metadata (manifests, member tables, outboards) the local cache failed to keep; reads were served from the store.
# TYPE pinfs_meta_cache_write_errors_total counter
pinfs_meta_cache_write_errors_total{digest="b3:abc"} 3
`
	url := serve(t, m) + "/metrics"
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(want), "pinfs_meta_cache_write_errors_total"); err != nil {
		t.Fatal(err)
	}
	mc.errs.Store(4) // read at scrape time
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(strings.Replace(want, "} 3", "} 4", 1)), "pinfs_meta_cache_write_errors_total"); err != nil {
		t.Fatal(err)
	}
}
