package bench

import (
	"fmt"
	"math"
	"testing"
)

// concRows adds the rows of the default-flags runs (res by reader count):
// CPU per GB against one reader's and single-thread b3sum's (b3 by file
// count), rate and collections, peak RSS against the logged bound.
func (b *bench) concRows(res map[int]concResult, b3 map[int]b3sumFig) {
	one := res[1]
	oneCell := fmt.Sprintf("one reader: %.2f s/GB", one.cpuPerGB())
	for _, n := range concReaders {
		r, files := res[n], max(n, concOneCount)
		f := b3[files]
		label := "local store, " + readersText(n) + ", default flags"
		cpu := perGB(r.m.daemon, r.m.bytes)
		cpuCell := fmt.Sprintf("%.2f s/GB", r.cpuPerGB())
		vsB3 := row{scenario: label + ": daemon CPU per GB vs single-thread b3sum of the same files", pinfs: cpuCell, b3sum: f.cell(files), cpu: cpu}
		if n == 1 {
			vsB3.ratio = fmt.Sprintf("%.2f", r.cpuPerGB()/f.perGB)
			b.infoRow(vsB3)
		} else {
			b.judge(row{scenario: label + ": daemon CPU per GB vs one reader's", pinfs: cpuCell, other: oneCell, cpu: cpu},
				r.cpuPerGB()/one.cpuPerGB(), false, targetConcCPUVsOne, "")
			b.judge(vsB3, r.cpuPerGB()/f.perGB, false, targetConcCPUVsB3sum, orNo(f.err))
		}
		info := row{scenario: label + ": aggregate rate; GC cycles per GB read (GODEBUG=gctrace=1)", cpu: cpu,
			pinfs: fmt.Sprintf("%s; %d cycles = %.1f per GB", gbs(r.m.gbps()), r.gc, r.gcPerGB())}
		if n > 1 {
			info.other = fmt.Sprintf("one reader: %s; %.1f cycles per GB", gbs(one.m.gbps()), one.gcPerGB())
		}
		b.infoRow(info)
		b.rssRow(row{scenario: label + ": daemon peak RSS (VmHWM) vs the memory bound the mount logs", cpu: cpu}, r)
	}
}

// rssRow adds r's peak RSS held to the memory bound its mount logged.
func (b *bench) rssRow(rw row, r concResult) {
	rw.pinfs = mb(r.hwm)
	if !r.boundOK {
		b.notRun(rw, "the mount logged no memory bound (neither a \"memory\" line with target= nor \"memory limit\")")
		return
	}
	rw.other = r.bound.what
	b.limitRow(rw, float64(r.hwm)/1e6, math.Round(float64(r.bound.bytes)/1e6), "MB")
}

// concNoDiskRows adds the --cache-disk 0 runs as report only: the read
// path without the disk tier's writes (the targets are on the
// default flags).
func (b *bench) concNoDiskRows(res map[int]concResult, b3 map[int]b3sumFig) {
	one := res[1]
	for _, n := range concReaders {
		r, files := res[n], max(n, concOneCount)
		vs := fmt.Sprintf("%.1f × single-thread b3sum", r.cpuPerGB()/b3[files].perGB)
		other := ""
		if n > 1 {
			vs += fmt.Sprintf(", %.2f × one reader's", r.cpuPerGB()/one.cpuPerGB())
			other = fmt.Sprintf("one reader: %.2f s/GB, %s", one.cpuPerGB(), gbs(one.m.gbps()))
		}
		b.infoRow(row{scenario: "local store, " + readersText(n) + ", --cache-disk 0 (no disk tier writes): daemon CPU per GB; rate; GC cycles per GB; VmHWM",
			pinfs: fmt.Sprintf("%.2f s/GB (%s); %s; %.1f GC/GB; %s", r.cpuPerGB(), vs, gbs(r.m.gbps()), r.gcPerGB(), mb(r.hwm)),
			other: other, cpu: perGB(r.m.daemon, r.m.bytes)})
	}
}

// memTargetRows runs 64 readers with --memory-target memTargetFlag: peak
// RSS at most memTargetBytes, and an aggregate rate within 20 % of def,
// the same readers with default flags. Without the flag both rows say
// "flag missing".
func (b *bench) memTargetRows(t *testing.T, fx *concFixture, def concResult) {
	label := fmt.Sprintf("local store, 64 sequential readers of 64 different 256 MiB members at once, --memory-target %s", memTargetFlag)
	rss := row{scenario: label + ": daemon peak RSS (VmHWM)", other: fmt.Sprintf("--memory-target %s = %s", memTargetFlag, mb(memTargetBytes))}
	rate := row{scenario: label + ": aggregate rate vs the same readers with default flags", other: "default flags: " + gbs(def.m.gbps())}
	if !b.mountHas("--memory-target") {
		b.notRun(rss, "flag missing (this pinfs mount has no --memory-target)")
		b.notRun(rate, "flag missing (this pinfs mount has no --memory-target)")
		return
	}
	r := b.concRun(t, fx, "local store, 64 readers, --memory-target "+memTargetFlag+" (dd bs=1M)", 64, "--memory-target", memTargetFlag)
	if r.boundOK && r.bound.bytes != memTargetBytes {
		t.Errorf("--memory-target %s: the mount logged %s, want %d bytes", memTargetFlag, r.bound.what, memTargetBytes)
	}
	rss.pinfs, rss.cpu = mb(r.hwm), perGB(r.m.daemon, r.m.bytes)
	b.limitRow(rss, float64(r.hwm)/1e6, math.Round(memTargetBytes/1e6), "MB")
	rate.pinfs, rate.cpu = fmt.Sprintf("%s; %d GC cycles = %.1f per GB", gbs(r.m.gbps()), r.gc, r.gcPerGB()), perGB(r.m.daemon, r.m.bytes)
	b.judge(rate, r.m.gbps()/def.m.gbps(), true, targetMemTargetVsDefault, "")
}
