package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinfs/pinfs/store/pool"
)

// labelHolder is the label of pinfs_pool_in_use: who holds a reference.
const labelHolder = "holder"

// PoolSource is the block pool the metrics read on every scrape
// (*pool.Pool satisfies it).
type PoolSource interface{ Stats() pool.Stats }

var _ PoolSource = (*pool.Pool)(nil)

// WatchPool exports the block pool's slots and waits: pinfs_pool_slots,
// pinfs_pool_free_slots, pinfs_pool_in_use{holder}, pinfs_pool_waits_total,
// pinfs_pool_wait_seconds_total and pinfs_pool_timeouts_total, read with
// one call of src.Stats per scrape. A nil src (or nil *pool.Pool) exports
// nothing. Call it once.
func (m *Metrics) WatchPool(src PoolSource) {
	if p, ok := src.(*pool.Pool); src == nil || ok && p == nil {
		return
	}
	m.labeled.MustRegister(newPoolCollector(src))
}

// poolCollector is a prometheus.Collector of a PoolSource.
type poolCollector struct {
	src                                   PoolSource
	slots, free, inUse, waits, wait, outs *prometheus.Desc
}

func newPoolCollector(src PoolSource) *poolCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &poolCollector{
		src:   src,
		slots: d("pinfs_pool_slots", "Slots of the block pool (1 MiB each): the block memory of the mount, off the Go heap."),
		free:  d("pinfs_pool_free_slots", "Slots of the block pool no one holds."),
		inUse: d("pinfs_pool_in_use", "References to pool blocks held, by holder (a block shared by two holders counts under each).", labelHolder),
		waits: d("pinfs_pool_waits_total", "Block loads that found no free slot in the pool and waited for one."),
		wait:  d("pinfs_pool_wait_seconds_total", "Time block loads spent waiting for a free slot in the pool."),
		outs:  d("pinfs_pool_timeouts_total", "Block loads whose read ran out of time (--read-timeout) waiting for a free slot."),
	}
}

// Describe implements prometheus.Collector.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.slots, c.free, c.inUse, c.waits, c.wait, c.outs} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: every holder is exported, the
// ones that hold nothing with 0, so that a series does not come and go.
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Stats()
	gauge, counter := prometheus.GaugeValue, prometheus.CounterValue
	ch <- prometheus.MustNewConstMetric(c.slots, gauge, float64(s.Slots))
	ch <- prometheus.MustNewConstMetric(c.free, gauge, float64(s.Free))
	for _, h := range pool.Holders() {
		ch <- prometheus.MustNewConstMetric(c.inUse, gauge, float64(s.InUse[h.String()]), h.String())
	}
	ch <- prometheus.MustNewConstMetric(c.waits, counter, float64(s.Waits))
	ch <- prometheus.MustNewConstMetric(c.wait, counter, s.WaitTime.Seconds())
	ch <- prometheus.MustNewConstMetric(c.outs, counter, float64(s.Timeouts))
}
