package metrics

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pinfs/pinfs/store/pool"
)

type fakePool struct {
	mu sync.Mutex
	st pool.Stats
}

func (f *fakePool) Stats() pool.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st
}

var poolMetrics = []string{"pinfs_pool_slots", "pinfs_pool_free_slots", "pinfs_pool_in_use",
	"pinfs_pool_waits_total", "pinfs_pool_wait_seconds_total", "pinfs_pool_timeouts_total"}

const wantPool = `# HELP pinfs_pool_free_slots Slots of the block pool no one holds.
# TYPE pinfs_pool_free_slots gauge
pinfs_pool_free_slots{digest="b3:abc"} 97
# HELP pinfs_pool_in_use References to pool blocks held, by holder (a block shared by two holders counts under each).
# TYPE pinfs_pool_in_use gauge
pinfs_pool_in_use{digest="b3:abc",holder="call"} 0
pinfs_pool_in_use{digest="b3:abc",holder="disk_queue"} 5
pinfs_pool_in_use{digest="b3:abc",holder="flight"} 8
pinfs_pool_in_use{digest="b3:abc",holder="memory"} 40
pinfs_pool_in_use{digest="b3:abc",holder="readahead"} 12
pinfs_pool_in_use{digest="b3:abc",holder="reader"} 3
pinfs_pool_in_use{digest="b3:abc",holder="serve"} 0
# HELP pinfs_pool_slots Slots of the block pool (1 MiB each): the block memory of the mount, off the Go heap.
# TYPE pinfs_pool_slots gauge
pinfs_pool_slots{digest="b3:abc"} 160
# HELP pinfs_pool_timeouts_total Block loads whose read ran out of time (--read-timeout) waiting for a free slot.
# TYPE pinfs_pool_timeouts_total counter
pinfs_pool_timeouts_total{digest="b3:abc"} 1
# HELP pinfs_pool_wait_seconds_total Time block loads spent waiting for a free slot in the pool.
# TYPE pinfs_pool_wait_seconds_total counter
pinfs_pool_wait_seconds_total{digest="b3:abc"} 2.25
# HELP pinfs_pool_waits_total Block loads that found no free slot in the pool and waited for one.
# TYPE pinfs_pool_waits_total counter
pinfs_pool_waits_total{digest="b3:abc"} 9
`

func TestWatchPool(t *testing.T) {
	m := New(&fakeSource{}, "digest", "b3:abc")
	f := &fakePool{st: pool.Stats{Slots: 160, Free: 97, SlotSize: pool.SlotSize,
		InUse: map[string]int64{"memory": 40, "readahead": 12, "reader": 3, "flight": 8, "disk_queue": 5},
		Waits: 9, Timeouts: 1, WaitTime: 2250 * time.Millisecond}}
	m.WatchPool(f)
	url := serve(t, m) + "/metrics"
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(wantPool), poolMetrics...); err != nil {
		t.Fatal(err)
	}
	// Read at scrape time.
	f.mu.Lock()
	f.st.Free, f.st.Waits = 96, 10
	f.mu.Unlock()
	want := strings.Replace(strings.Replace(wantPool, "} 97\n", "} 96\n", 1), "waits_total{digest=\"b3:abc\"} 9\n", "waits_total{digest=\"b3:abc\"} 10\n", 1)
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(want), poolMetrics...); err != nil {
		t.Fatal(err)
	}
}

// TestWatchPoolNil: a mount without a pool exports none of its metrics.
func TestWatchPoolNil(t *testing.T) {
	m := New(&fakeSource{})
	var p *pool.Pool
	m.WatchPool(p)
	m.WatchPool(nil)
	body := get(t, serve(t, m)+"/metrics")
	if strings.Contains(body, "pinfs_pool_") {
		t.Errorf("metrics of no pool:\n%s", body)
	}
}

// TestWatchPoolReal reads a real pool: the slot a load holds.
func TestWatchPoolReal(t *testing.T) {
	p, err := pool.New(2 * pool.SlotSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	b, err := p.Get(t.Context(), pool.SlotSize, pool.Flight)
	if err != nil {
		t.Fatal(err)
	}
	m := New(&fakeSource{})
	m.WatchPool(p)
	body := get(t, serve(t, m)+"/metrics")
	for _, line := range []string{"pinfs_pool_slots 2\n", "pinfs_pool_free_slots 1\n", `pinfs_pool_in_use{holder="flight"} 1` + "\n", "pinfs_pool_waits_total 0\n"} {
		if !strings.Contains(body, line) {
			t.Errorf("metrics lack %q", line)
		}
	}
	b.Release(pool.Flight)
}

func TestNewPanicsOnHolderLabel(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error(`New("holder", "x") did not panic`)
		}
	}()
	New(&fakeSource{}, "holder", "x")
}
