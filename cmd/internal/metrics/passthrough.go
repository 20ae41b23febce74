package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinfs/pinfs/fs"
)

// PassthroughSource is a mount's passthrough switch and counters, read on
// every scrape (*fs.Passthrough satisfies it).
type PassthroughSource interface{ Status() fs.PassthroughStatus }

var _ PassthroughSource = (*fs.Passthrough)(nil)

// WatchPassthrough exports src's counters: pinfs_passthrough_opens_total
// and pinfs_passthrough_bytes_total. The read metrics never see the reads
// of such opens (they do not reach the daemon), so these are how a
// scrape tells a quiet passthrough epoch from an idle mount. Call it once.
func (m *Metrics) WatchPassthrough(src PassthroughSource) {
	m.labeled.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "pinfs_passthrough_opens_total",
			Help: "Opens the kernel served from a verified cache file (FUSE passthrough); their reads never reach the daemon.",
		}, func() float64 { return float64(src.Status().Opens) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "pinfs_passthrough_bytes_total",
			Help: "Sum of the sizes of the members of passthrough opens (each counts as read in full).",
		}, func() float64 { return float64(src.Status().Bytes) }),
	)
}
