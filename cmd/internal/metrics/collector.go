package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinfs/pinfs/store/blocks"
)

// stat is one metric read from blocks.Stats at scrape time.
type stat struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*blocks.Stats) int64
	label string // the value of the metric's variable label, if it has one
}

// statsCollector is a prometheus.Collector that reads Source.Stats once
// per scrape and turns it into constant metrics: the read path does no
// work for it.
type statsCollector struct {
	src   Source
	stats []stat
}

func newStatsCollector(src Source) *statsCollector {
	const (
		counter = prometheus.CounterValue
		gauge   = prometheus.GaugeValue
	)
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	var (
		hits = desc("pinfs_cache_hits_total",
			"Blocks served from a cache tier: memory, or disk (counted once verified).", labelTier)
		misses = desc("pinfs_cache_misses_total",
			"Lookups in a cache tier that found no block. A block that is not in memory "+
				"may be looked up there twice: once by the read, once by the load it starts.", labelTier)
		evictions = desc("pinfs_cache_evictions_total",
			"Blocks evicted from a cache tier to stay within its budget.", labelTier)
	)
	mk := func(d *prometheus.Desc, kind prometheus.ValueType, v func(*blocks.Stats) int64, label ...string) stat {
		st := stat{desc: d, kind: kind, value: v}
		if len(label) > 0 {
			st.label = label[0]
		}
		return st
	}
	return &statsCollector{src: src, stats: []stat{
		mk(desc("pinfs_bytes_served_total", "Bytes copied into readers' buffers."),
			counter, func(s *blocks.Stats) int64 { return s.BytesServed }),
		mk(desc("pinfs_blocks_verified_total", "Blocks, from disk or the network, that passed BLAKE3 verification."),
			counter, func(s *blocks.Stats) int64 { return s.BlocksVerified }),
		mk(hits, counter, func(s *blocks.Stats) int64 { return s.MemHits }, "memory"),
		mk(hits, counter, func(s *blocks.Stats) int64 { return s.DiskHits }, "disk"),
		mk(misses, counter, func(s *blocks.Stats) int64 { return s.Mem.Misses }, "memory"),
		mk(misses, counter, func(s *blocks.Stats) int64 { return s.Disk.Misses }, "disk"),
		mk(evictions, counter, func(s *blocks.Stats) int64 { return s.Mem.Evictions }, "memory"),
		mk(evictions, counter, func(s *blocks.Stats) int64 { return s.Disk.Evictions }, "disk"),
		mk(desc("pinfs_memory_cache_bytes", "Bytes held by the memory cache tier."),
			gauge, func(s *blocks.Stats) int64 { return s.Mem.Bytes }),
		mk(desc("pinfs_disk_cache_bytes", "Bytes held by the disk cache tier."),
			gauge, func(s *blocks.Stats) int64 { return s.Disk.Bytes }),
		mk(desc("pinfs_disk_cache_blocks", "Blocks held by the disk cache tier."),
			gauge, func(s *blocks.Stats) int64 { return s.Disk.Blocks }),
		mk(desc("pinfs_disk_cache_write_errors_total", "Verified blocks the disk cache tier failed to store."),
			counter, func(s *blocks.Stats) int64 { return s.Disk.WriteErrors }),
		mk(desc("pinfs_network_fetches_total", "Blocks fetched from the store."),
			counter, func(s *blocks.Stats) int64 { return s.NetworkFetches }),
		mk(desc("pinfs_joined_reads_total", "Block reads served by a load that another read or a readahead had started."),
			counter, func(s *blocks.Stats) int64 { return s.Joined }),
		mk(desc("pinfs_store_requests_total", "Ranged reads sent to the store: first tries, resumptions and retries."),
			counter, func(s *blocks.Stats) int64 { return s.Requests }),
		mk(desc("pinfs_store_retries_total", "Store requests and outboard loads repeated after a failure."),
			counter, func(s *blocks.Stats) int64 { return s.Retries }),
		mk(desc("pinfs_verification_failures_total", "Copies of blocks, from disk or the network, that failed BLAKE3 verification."),
			counter, func(s *blocks.Stats) int64 { return s.Mismatches }),
		mk(desc("pinfs_readahead_fetches_total", "Block loads started by readahead."),
			counter, func(s *blocks.Stats) int64 { return s.Readaheads }),
		mk(desc("pinfs_readahead_skipped_total", "Times readahead stopped short for lack of room in the readahead budget (its blocks are asked for again at the next read)."),
			counter, func(s *blocks.Stats) int64 { return s.ReadaheadSkipped }),
		mk(desc("pinfs_readahead_budget_bytes", "Bytes readahead and warm loads may have requested and not yet read at once (--readahead-budget)."),
			gauge, func(s *blocks.Stats) int64 { return s.ReadaheadBudget }),
		mk(desc("pinfs_readahead_inflight_bytes", "Bytes readahead and warm loads have requested and not yet read: in flight, or loaded and waiting for their reader."),
			gauge, func(s *blocks.Stats) int64 { return s.ReadaheadBytes }),
		mk(desc("pinfs_readahead_window_max_bytes", "The largest readahead window a sequential reader has reached (at most --readahead-max)."),
			gauge, func(s *blocks.Stats) int64 { return s.ReadaheadWindowMax }),
		mk(desc("pinfs_readahead_streams", "Streams holding room in the readahead budget now; each gets a fair share of it."),
			gauge, func(s *blocks.Stats) int64 { return int64(s.ReadaheadStreams) }),
		mk(desc("pinfs_runs_cut_total", "Runs of blocks cut short because the pool had no free slot for all of them (their other blocks load alone)."),
			counter, func(s *blocks.Stats) int64 { return s.RunsCut }),
		mk(desc("pinfs_loads_lost_total", "Loaded blocks that left every holder before their reader took a reference, and were loaded again."),
			counter, func(s *blocks.Stats) int64 { return s.Lost }),
		mk(desc("pinfs_readahead_resets_total", "Open readahead windows closed by a reader that jumped (seeked, or read at random)."),
			counter, func(s *blocks.Stats) int64 { return s.ReadaheadResets }),
		mk(desc("pinfs_outboard_loads_total", "Bao outboards loaded through the metadata cache for verification."),
			counter, func(s *blocks.Stats) int64 { return s.OutboardLoads }),
		mk(desc("pinfs_fetch_failures_total", "Block loads that failed for a storage error, after retries or the read timeout (fetch_failed events)."),
			counter, func(s *blocks.Stats) int64 { return s.FetchFailed }),
		mk(desc("pinfs_versions_missing_total", "Block loads that found the pinned object version gone (version_missing events)."),
			counter, func(s *blocks.Stats) int64 { return s.VersionMissing }),
		mk(desc("pinfs_events_unrecorded_total", "Read-path events the run record and its spool could not take; each failed the read that caused it (EIO)."),
			counter, func(s *blocks.Stats) int64 { return s.EventsUnrecorded }),
	}}
}

// Describe implements prometheus.Collector.
func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	seen := make(map[*prometheus.Desc]bool, len(c.stats))
	for _, s := range c.stats {
		if !seen[s.desc] {
			seen[s.desc] = true
			ch <- s.desc
		}
	}
}

// Collect implements prometheus.Collector: one call of Source.Stats per
// scrape.
func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Stats()
	for _, s := range c.stats {
		var labels []string
		if s.label != "" {
			labels = []string{s.label}
		}
		ch <- prometheus.MustNewConstMetric(s.desc, s.kind, float64(s.value(&st)), labels...)
	}
}
