package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ptColdRuns is how many cold reads each setting gets: the spread between
// them is what "no slower than today" is read against.
const ptColdRuns = 2

// ptCold is row 5 of the passthrough scenario: the 1 GiB member read cold
// (fresh cache dir, page cache dropped, server warmed) with passthrough on
// and with --passthrough=false, alternately, ptColdRuns times each. A cold
// open finds no whole-member file, so both serve it through the block
// reader; both write the new cache layout, and no build from before it
// runs in the same run, so the row is report only: the two settings and
// each one's run-to-run spread.
func (b *bench) ptCold(t *testing.T) {
	runs := map[bool][]measure{}
	for i := range ptColdRuns {
		for _, pt := range []bool{true, false} {
			name := fmt.Sprintf("1 GiB cold first epoch, %s, run %d (cache-mem 256MiB, cache-disk 10GiB)", ptSetting(pt), i+1)
			cache := t.TempDir()
			flags := []string{"--cache-mem", "256MiB", "--cache-disk", "10GiB"}
			if !pt {
				flags = append(flags, "--passthrough=false")
			}
			m := b.mount(t, name, b.env, b.bigDigest, storeURL, cache, flags...)
			dropCaches(t)
			b.warmServer(t, b.bigObj())
			got := b.dd(t, "pinfs "+name, filepath.Join(m.dir, bigMember), m.pid, bigSize)
			if tot := b.finish(t, m); tot != nil && tot["network_fetches"] == 0 {
				t.Errorf("%s: no network fetch from a fresh cache dir", name)
			}
			os.RemoveAll(cache) // 1 GiB each: the next runs need no more than one
			runs[pt] = append(runs[pt], got)
		}
	}
	on, off := runs[true], runs[false]
	b.infoRow(row{scenario: fmt.Sprintf("passthrough: 1 GiB cold first epoch (fresh cache dir), passthrough on vs --passthrough=false, %d runs each", ptColdRuns),
		pinfs: coldCell(on), other: coldCell(off) + " (--passthrough=false)",
		ratio:  fmt.Sprintf("%.2f (means)", meanRate(on)/meanRate(off)),
		target: "no slower than today beyond the spread: both runs have the new cache layout and no older build runs here, so report only",
		cpu:    perGB(on[0].daemon, on[0].bytes) + " / " + perGB(off[0].daemon, off[0].bytes)})
}

func ptSetting(pt bool) string {
	if pt {
		return "passthrough"
	}
	return "--passthrough=false"
}

// coldCell lists the runs' rates, their mean and their spread.
func coldCell(ms []measure) string {
	var rates []string
	lo, hi := ms[0].gbps(), ms[0].gbps()
	for _, m := range ms {
		rates = append(rates, fmt.Sprintf("%.3f", m.gbps()))
		lo, hi = min(lo, m.gbps()), max(hi, m.gbps())
	}
	mean := meanRate(ms)
	return fmt.Sprintf("%s GB/s (mean %.3f, spread %.0f %%)", strings.Join(rates, " / "), mean, 100*(hi-lo)/mean)
}

func meanRate(ms []measure) float64 {
	var s float64
	for _, m := range ms {
		s += m.gbps()
	}
	return s / float64(len(ms))
}
