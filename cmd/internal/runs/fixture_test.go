package runs

import (
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// testDigest is the snapshot digest of the hand-built runs.
var testDigest = verify.SHA256([]byte("a snapshot"))

// testTable returns a small member table: S3 and CAS members, one empty,
// with and without a split.
func testTable(t testing.TB) *verify.Table {
	t.Helper()
	s3 := func(path, version string, size int64, split string) verify.Member {
		return verify.Member{ID: path, Path: path, Split: split, Size: size, Digest: "blake3:" + b3.Of([]byte(path)).Hex(),
			S3: &verify.S3Source{Bucket: "bkt", Key: "k/" + path, VersionID: version}}
	}
	cas := func(path string, size int64) verify.Member {
		d := "blake3:" + b3.Of([]byte(path)).Hex()
		return verify.Member{ID: "id-" + path, Path: path, Size: size, Digest: d, CAS: d}
	}
	return verify.NewTable([]verify.Member{
		s3("a/x.bin", "v-x", 10_000, "train"), // 0: three granules, the last cut
		cas("a/y.bin", 5000),                  // 1
		s3("b/z.bin", "v-z", 0, "train"),      // 2: empty
		s3("c/w.bin", "v-w", 9000, "val"),     // 3
		cas("d/unread", 100),                  // 4: never read
	})
}

// read is one thing a mount recorded: member i opened, and either read in
// full or the granules listed.
type read struct {
	i        uint32
	full     bool
	granules []uint32
}

// setOf builds a consumed set of reads, keeping its invariants.
func setOf(rs ...read) *consumed.Set {
	s := consumed.NewSet()
	for _, r := range rs {
		one := consumed.NewSet()
		one.Opened.Add(r.i)
		if r.full {
			one.Full.Add(r.i)
		} else if len(r.granules) > 0 {
			one.Parts[r.i] = roaring.BitmapOf(r.granules...)
		}
		s.Union(one)
	}
	return s
}

// at returns a fixed time plus d seconds.
func at(d int) time.Time { return time.Date(2025, 3, 1, 12, 0, d, 0, time.UTC) }

// event returns an event of run "r1" of kind at second d by host.
func event(kind string, d int, host string, pid int) runrecord.Event {
	return runrecord.Event{Time: at(d), RunID: "r1", Digest: testDigest, Event: kind, Seq: int64(d), Host: host, PID: pid}
}

// consumedEvent returns a consumed event at second d carrying s.
func consumedEvent(d int, host string, pid int, s *consumed.Set) runrecord.Event {
	e := event(runrecord.ConsumedSet, d, host, pid)
	e.Set = s.Encode()
	return e
}

// integrity returns an integrity event of kind naming path.
func integrity(kind string, d int, path string) runrecord.Event {
	e := event(kind, d, "h1", 11)
	e.Path, e.MemberID, e.Error = path, path, kind+" here"
	return e
}

// testRun is a run with two mounts on two hosts (the first ended, the
// second resumed and ended), consumed deltas from both, and integrity events.
func testRun() *runrecord.Run {
	end1 := event(runrecord.RunEnd, 20, "h1", 11)
	end1.Totals = &runrecord.Totals{MembersOpened: 2, BytesServed: 100, Mismatches: 2}
	end2 := event(runrecord.RunEnd, 60, "h2", 22)
	end2.Totals = &runrecord.Totals{MembersOpened: 3, BytesServed: 50, FetchFailed: 1}
	return &runrecord.Run{
		RunID: "r1", Digest: testDigest,
		Events: []runrecord.Event{
			event(runrecord.RunStart, 1, "h1", 11),
			consumedEvent(5, "h1", 11, setOf(read{i: 0, granules: []uint32{0}}, read{i: 2, full: true})),
			integrity(runrecord.Mismatch, 6, "c/w.bin"),
			integrity(runrecord.Mismatch, 7, "c/w.bin"),
			integrity(runrecord.Mismatch, 8, "a/x.bin"),
			consumedEvent(10, "h1", 11, setOf(read{i: 0, granules: []uint32{2}})),
			end1,
			event(runrecord.Resume, 30, "h2", 22),
			integrity(runrecord.FetchFailed, 35, "a/y.bin"),
			consumedEvent(40, "h2", 22, setOf(read{i: 1, full: true}, read{i: 3})),
			end2,
		},
		Spooled: 1, Torn: 1,
	}
}
