package runs

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/verify"
)

// partsBomb returns the text of a consumed set naming members 0..n-1 as
// read in part, granule 0 of each: a few bytes of text per thousand
// members, as deflate packs the repeats.
func partsBomb(n uint64) string {
	var bin []byte
	bin = binary.AppendUvarint(bin, 0)                                                     // only opened: none
	bin = binary.AppendUvarint(bin, 0)                                                     // full: none
	bin = binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(bin, 1), 0), n-1) // parts' members: 0..n-1
	for range n {
		bin = append(bin, 1, 0, 0) // one run: granule 0
	}
	var z bytes.Buffer
	w, _ := flate.NewWriter(&z, flate.BestCompression)
	w.Write(bin)
	w.Close()
	return "c1." + base64.RawURLEncoding.EncodeToString(z.Bytes())
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// boundedTable returns a table of n members of one granule each.
func boundedTable(n int) *verify.Table {
	ms := make([]verify.Member, n)
	for i := range ms {
		ms[i] = verify.Member{Path: fmt.Sprintf("m/%06d", i), ID: fmt.Sprintf("m/%06d", i), Size: consumed.Granule, Digest: "blake3:00"}
	}
	return verify.NewTable(ms)
}

// A consumed event of a few kilobytes naming far more members than the
// table has is refused before the members are made (issue 22, item 4).
func TestConsumedRefusesMembersBeyondTheTableBeforeAllocating(t *testing.T) {
	tab := boundedTable(10)
	text := partsBomb(1 << 18)
	run := &runrecord.Run{RunID: "bomb", Events: []runrecord.Event{{Event: runrecord.ConsumedSet, Set: text}}}
	var err error
	got := allocated(func() { _, err = Consumed(run, tab) })
	if err == nil || !strings.Contains(err.Error(), "10 members") {
		t.Fatalf("Consumed of %d bytes naming 262144 members of a 10-member table = %v, want it refused naming the table's 10 members", len(text), err)
	}
	t.Logf("%v; %d bytes", err, got)
	if got > 1<<20 {
		t.Fatalf("refusing %d bytes of text allocated %d bytes, want at most 1 MiB for a 10-member table", len(text), got)
	}
}

// Events that each fit the table but together decode to many times it are
// refused once they pass the run's cap, before the rest are decoded.
func TestConsumedBoundsTheRunAcrossEvents(t *testing.T) {
	const n = 2000
	tab := boundedTable(n)
	text := partsBomb(n) // every member in part: as much as one set of this table can say
	run := &runrecord.Run{RunID: "many"}
	for k := range 500 {
		run.Events = append(run.Events, runrecord.Event{Event: runrecord.ConsumedSet, Seq: int64(k + 1), Set: text})
	}
	one := allocated(func() {
		if _, err := Consumed(&runrecord.Run{RunID: "one", Events: run.Events[:1]}, tab); err != nil {
			t.Fatalf("one event of the whole table: %v", err)
		}
	})
	var err error
	got := allocated(func() { _, err = Consumed(run, tab) })
	if err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("500 events each naming all %d members = %v, want the run refused past its cap", n, err)
	}
	t.Logf("%v; %d bytes, one %d", err, got, one)
	if got > 16*one {
		t.Fatalf("refusing the run allocated %d bytes, %d times what one whole-table event takes (%d); want at most 16", got, got/one, one)
	}
}
