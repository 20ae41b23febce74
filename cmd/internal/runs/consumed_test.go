package runs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/jcs"
	"github.com/pinfs/pinfs/verify/verifytest"
)

func TestConsumedUnionsDeltasOfEveryMount(t *testing.T) {
	tab := testTable(t)
	s, err := Consumed(testRun(), tab)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Opened.ToArray(); fmt.Sprint(got) != "[0 1 2 3]" {
		t.Fatalf("opened %v", got)
	}
	if got := s.Full.ToArray(); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("full %v", got)
	}
	// Member 0 read granules 0 and 2 (of 10000 bytes) in two deltas.
	if b := s.Bytes(0, tab.Size(0)); b != consumed.Granule+10_000-2*consumed.Granule {
		t.Fatalf("member 0: %d bytes", b)
	}
}

func TestConsumedReadsOldMemberLists(t *testing.T) {
	tab := testTable(t)
	old := func(d int, ms ...runrecord.Consumed) runrecord.Event {
		e := event(runrecord.ConsumedSet, d, "", 0)
		e.Members = ms
		return e
	}
	// Two cumulative lists of one mount, then a resumed mount's own list
	// next to a compact delta: a member listed twice counts once, with its
	// largest byte count.
	run := &runrecord.Run{RunID: "old", Digest: testDigest, Events: []runrecord.Event{
		old(1, runrecord.Consumed{Path: "a/x.bin", Bytes: 4096}),
		old(2, runrecord.Consumed{Path: "a/x.bin", Bytes: 5000}, runrecord.Consumed{Path: "a/y.bin", Bytes: 5000, Full: true}),
		old(3, runrecord.Consumed{Path: "a/x.bin", Bytes: 100}),
		consumedEvent(4, "h", 1, setOf(read{i: 3, granules: []uint32{1}})),
	}}
	s, err := Consumed(run, tab)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(s.Opened.ToArray()) != "[0 1 3]" || fmt.Sprint(s.Full.ToArray()) != "[1]" {
		t.Fatalf("opened %v full %v", s.Opened.ToArray(), s.Full.ToArray())
	}
	if b := s.Bytes(0, tab.Size(0)); b != 2*consumed.Granule {
		t.Fatalf("member 0: %d bytes, want the granules of its largest count", b)
	}
	run.Events = append(run.Events, old(5, runrecord.Consumed{Path: "no/such"}))
	if _, err := Consumed(run, tab); err == nil {
		t.Fatal("an old list naming an unknown path was accepted")
	}
}

func TestConsumedRefusesBadSets(t *testing.T) {
	tab := testTable(t)
	for name, e := range map[string]runrecord.Event{
		"index beyond the table": consumedEvent(1, "h", 1, setOf(read{i: 5, full: true})),
		"not a set":              {Event: runrecord.ConsumedSet, Set: "garbage"},
	} {
		run := &runrecord.Run{RunID: "bad", Events: []runrecord.Event{e}}
		if s, err := Consumed(run, tab); err == nil {
			t.Errorf("%s: accepted, %v", name, s.Opened.ToArray())
		}
	}
}

func TestConsumedDigestIgnoresHowTheSetWasSplit(t *testing.T) {
	tab := testTable(t)
	reads := []read{
		{i: 0, granules: []uint32{0}}, {i: 0, granules: []uint32{2}},
		{i: 1, granules: []uint32{0}}, {i: 1, full: true}, {i: 2, full: true}, {i: 3},
	}
	whole := ConsumedDigest(setOf(reads...), tab)

	// The same reads, one delta each, shuffled, over two mounts.
	for seed := range uint64(5) {
		rs := append([]read(nil), reads...)
		rand.New(rand.NewPCG(seed, 1)).Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
		run := &runrecord.Run{RunID: "split", Digest: testDigest}
		for k, r := range rs {
			run.Events = append(run.Events, consumedEvent(k, fmt.Sprint("h", k%2), k%2, setOf(r)))
		}
		s, err := Consumed(run, tab)
		if err != nil {
			t.Fatal(err)
		}
		if got := ConsumedDigest(s, tab); got != whole {
			t.Fatalf("seed %d: %s, want %s", seed, got, whole)
		}
	}

	// Every granule of member 3 read is the same as member 3 read in full.
	if got := ConsumedDigest(setOf(append(reads, read{i: 3, granules: []uint32{0, 1, 2}})...), tab); got != ConsumedDigest(setOf(append(reads, read{i: 3, full: true})...), tab) {
		t.Error("member 3 read granule by granule differs from member 3 read in full")
	}

	// One more granule (one byte more read, counted in granules), another
	// member opened, or a member read in full instead of in part: another digest.
	for name, more := range map[string]read{
		"one more granule": {i: 3, granules: []uint32{0}},
		"one more opened":  {i: 4},
		"read in full":     {i: 0, full: true},
	} {
		if got := ConsumedDigest(setOf(append(reads, more)...), tab); got == whole {
			t.Errorf("%s: same digest %s", name, got)
		}
	}
}

// TestConsumedDigestIsTheDocumentedList recomputes the digest from the
// format the doc comment gives, so a change of format must change both.
func TestConsumedDigestIsTheDocumentedList(t *testing.T) {
	tab := testTable(t)
	s := setOf(read{i: 0, granules: []uint32{2}}, read{i: 1, full: true}, read{i: 3})
	var want strings.Builder
	for _, l := range []struct {
		i       int
		version string
		bytes   int64
		full    bool
	}{
		{0, "v-x", 10_000 - 2*consumed.Granule, false},
		{1, "cas:" + tab.Digest(1), 5000, true},
		{3, "v-w", 0, false},
	} {
		fmt.Fprintf(&want, `{"index":%d,"id":%q,"digest":%q,"version":%q,"bytes":%d,"full":%v}`+"\n",
			l.i, tab.ID(l.i), tab.Digest(l.i), l.version, l.bytes, l.full)
	}
	sum := sha256.Sum256([]byte(want.String()))
	if got := ConsumedDigest(s, tab); got != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("digest %s of\n%s", got, want.String())
	}
	if got := ConsumedDigest(setOf(read{i: 5}), tab); got != "" {
		t.Fatalf("set beyond the table: %q", got)
	}
	empty := sha256.Sum256(nil)
	if got := ConsumedDigest(consumed.NewSet(), tab); got != "sha256:"+hex.EncodeToString(empty[:]) {
		t.Fatalf("empty set: %s", got)
	}
}

func TestAppendStringIsJCS(t *testing.T) {
	for _, s := range []string{"", "plain/path.jpg", `a"b`, `back\slash`, "tab\there", "nl\n", "\x01\x1f", "é ü 漢", "\x7f"} {
		if got, want := string(appendString(nil, s)), string(jcs.AppendString(nil, s)); got != want {
			t.Errorf("%q: %s, want %s", s, got, want)
		}
	}
}

// TestConsumedDigestInChunks checks the parallel digest of a set larger
// than a chunk against its lines made in one piece.
func TestConsumedDigestInChunks(t *testing.T) {
	n := 3*digestChunk + 7
	tab := verify.NewTable(verifytest.Members(n, verifytest.S3, 2))
	s := consumed.NewSet()
	for i := 0; i < n; i += 3 {
		s.Opened.Add(uint32(i))
		if i%2 == 0 {
			s.Full.Add(uint32(i))
		}
	}
	sum := sha256.Sum256(consumedLines(s, tab, s.Opened.ToArray()))
	if got := ConsumedDigest(s, tab); got != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("chunked digest %s differs", got)
	}
}
