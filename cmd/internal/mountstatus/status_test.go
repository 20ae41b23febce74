package mountstatus

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/buildinfo"
	"github.com/pinfs/pinfs/store/blocks"
)

func testSource(started time.Time) *Source {
	return &Source{
		Mountpoint: "/data/sha256:ab", Digest: "sha256:ab", RunID: "run-1", Store: "s3://b/p", CacheDir: "/c",
		Members: 1000, Started: started,
		Stats: func() blocks.Stats {
			return blocks.Stats{BytesServed: 12345, MemHits: 10, DiskHits: 2, NetworkFetches: 5,
				Mismatches: 3, VersionMissing: 1, FetchFailed: 4, BlocksVerified: 99}
		},
		MembersOpened: func() int64 { return 7 },
	}
}

func TestSourceStatus(t *testing.T) {
	started := time.Now().Add(-62 * time.Second)
	st := testSource(started).Status()
	want := Status{
		Mountpoint: "/data/sha256:ab", Serving: true, Digest: "sha256:ab", RunID: "run-1", PID: os.Getpid(),
		Started: started, UptimeSeconds: st.UptimeSeconds, Store: "s3://b/p", CacheDir: "/c", Members: 1000,
		MembersOpened: 7, BytesServed: 12345, CacheHits: Tiers{Memory: 10, Disk: 2}, NetworkFetches: 5, BlocksVerified: 99,
		IntegrityEvents: Integrity{Mismatch: 3, VersionMissing: 1, FetchFailed: 4, Total: 8},
		Version:         buildinfo.Get(),
	}
	if *st != want {
		t.Errorf("status\n got %+v\nwant %+v", *st, want)
	}
	if st.UptimeSeconds < 62 {
		t.Errorf("uptime %v s, want at least 62", st.UptimeSeconds)
	}
	if st.Version.Version == "" {
		t.Errorf("status names no version: %+v", st.Version)
	}

	// The store's last error, as the mount's store/health reports it.
	src := testSource(started)
	se := &StoreError{Kind: "access", Message: "s3://st: the secret key is wrong", Time: started}
	src.StoreError = func() *StoreError { return se }
	if got := src.Status().StoreError; got != se {
		t.Errorf("store error %+v, want %+v", got, se)
	}
	src.StoreError = func() *StoreError { return nil }
	if got := src.Status().StoreError; got != nil {
		t.Errorf("store error %+v, want none", got)
	}
}

// TestJSONFieldNames pins the names scripts and probes read.
func TestJSONFieldNames(t *testing.T) {
	b := testSource(time.Now()).JSON()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	var keys []string
	for k := range m {
		if k != "blocks_verified" { // TestStatusBlocksVerified
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	want := []string{"bytes_served", "cache_dir", "cache_hits", "digest", "integrity_events", "members",
		"members_opened", "mountpoint", "network_fetches", "pid", "run_id", "serving", "started", "store", "uptime_seconds",
		"version"}
	if !slices.Equal(keys, want) {
		t.Errorf("keys %v\nwant %v", keys, want)
	}
	if v, ok := m["version"].(map[string]any); !ok || v["version"] != buildinfo.Get().Version {
		t.Errorf("version %v, want the build's %+v", m["version"], buildinfo.Get())
	}
	src := testSource(time.Now())
	src.StoreError = func() *StoreError {
		return &StoreError{Kind: "unreachable", Message: "cannot reach S3", Time: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	}
	var withErr struct {
		StoreError json.RawMessage `json:"store_error"`
	}
	if err := json.Unmarshal(src.JSON(), &withErr); err != nil ||
		string(withErr.StoreError) != `{"kind":"unreachable","message":"cannot reach S3","time":"2026-12-02T08:00:00Z"}` {
		t.Errorf("store_error %s (%v)", withErr.StoreError, err)
	}
	src.Passthrough = func() Passthrough { return Passthrough{Enabled: true, Opens: 2, Bytes: 300} }
	var withPT struct {
		Passthrough json.RawMessage `json:"passthrough"`
	}
	if err := json.Unmarshal(src.JSON(), &withPT); err != nil || string(withPT.Passthrough) != `{"enabled":true,"opens":2,"bytes":300}` {
		t.Errorf("passthrough %s (%v)", withPT.Passthrough, err)
	}
	src.Passthrough = func() Passthrough { return Passthrough{Reason: "no CAP_SYS_ADMIN"} }
	if err := json.Unmarshal(src.JSON(), &withPT); err != nil || string(withPT.Passthrough) != `{"enabled":false,"reason":"no CAP_SYS_ADMIN","opens":0,"bytes":0}` {
		t.Errorf("passthrough off: %s (%v)", withPT.Passthrough, err)
	}
	hits, _ := json.Marshal(m["cache_hits"])
	integrity, _ := json.Marshal(m["integrity_events"])
	if string(hits) != `{"disk":2,"memory":10}` || string(integrity) != `{"fetch_failed":4,"mismatch":3,"total":8,"version_missing":1}` {
		t.Errorf("cache_hits %s, integrity_events %s", hits, integrity)
	}

	// Not serving: no daemon fields, the error, the counters at zero.
	b, _ = json.Marshal(&Status{Mountpoint: "/x", Error: "/x is not a pinfs mount"})
	const wantDown = `{"mountpoint":"/x","serving":false,"error":"/x is not a pinfs mount","uptime_seconds":0,"members":0,` +
		`"members_opened":0,"bytes_served":0,"cache_hits":{"memory":0,"disk":0},"network_fetches":0,` +
		`"integrity_events":{"mismatch":0,"version_missing":0,"fetch_failed":0,"total":0}}`
	if string(b) != wantDown {
		t.Errorf("not serving:\n got %s\nwant %s", b, wantDown)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	src := testSource(time.Now().Add(-time.Hour))
	got, err := decode("/elsewhere", src.JSON())
	if err != nil {
		t.Fatal(err)
	}
	want := src.Status()
	if got.Mountpoint != "/elsewhere" || got.RunID != want.RunID || got.IntegrityEvents != want.IntegrityEvents ||
		got.CacheHits != want.CacheHits || !got.Started.Equal(want.Started) || got.PID != want.PID {
		t.Errorf("decoded %+v\nfrom %+v", got, want)
	}
}

func TestWriteText(t *testing.T) {
	st := testSource(time.Now()).Status()
	st.UptimeSeconds = 62.4
	var b bytes.Buffer
	if err := st.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "/data/sha256:ab serving sha256:ab run run-1 pid " + strconv.Itoa(os.Getpid()) + " up 1m2s\n" +
		"  members 7/1000 opened, 12345 bytes served\n" +
		"  cache hits: memory 10, disk 2; network fetches 5\n" +
		"  integrity events: 8 (mismatch 3, version_missing 1, fetch_failed 4)\n" +
		"  pinfs " + buildinfo.Get().String() + "\n"
	if b.String() != want {
		t.Errorf("text\n%s\nwant\n%s", b.String(), want)
	}

	st.StoreError = &StoreError{Kind: "unreachable", Message: "cannot reach S3 at http://h: connection refused",
		Time: time.Date(2026, 12, 2, 8, 0, 0, 0, time.FixedZone("CET", 3600))}
	b.Reset()
	st.WriteText(&b)
	if line := "  store error: unreachable at 2026-12-02T07:00:00Z: cannot reach S3 at http://h: connection refused\n"; !strings.Contains(b.String(), line) {
		t.Errorf("text\n%s\nlacks\n%s", b.String(), line)
	}

	for _, c := range []struct {
		p    Passthrough
		line string
	}{
		{Passthrough{Enabled: true, Opens: 3, Bytes: 1 << 30}, "  passthrough on: 3 opens, 1073741824 bytes\n"},
		{Passthrough{Reason: "disabled (--passthrough=false)"}, "  passthrough off: disabled (--passthrough=false)\n"},
	} {
		st.Passthrough = &c.p
		b.Reset()
		st.WriteText(&b)
		if !strings.Contains(b.String(), c.line+"  pinfs ") {
			t.Errorf("text\n%s\nlacks, before the version,\n%s", b.String(), c.line)
		}
	}

	b.Reset()
	(&Status{Mountpoint: "/x", Error: "/x is not a pinfs mount"}).WriteText(&b)
	if got := b.String(); got != "/x not serving: /x is not a pinfs mount\n" {
		t.Errorf("not serving: %q", got)
	}
}

// TestStatusBlocksVerified: the status has every counter of run_end's
// totals, blocks_verified too, for pinfs run show of a live run; a status
// that is not serving leaves it out.
func TestStatusBlocksVerified(t *testing.T) {
	var m map[string]any
	if err := json.Unmarshal(testSource(time.Now()).JSON(), &m); err != nil {
		t.Fatal(err)
	}
	if m["blocks_verified"] != float64(99) {
		t.Errorf("blocks_verified %v, want 99", m["blocks_verified"])
	}
	b, _ := json.Marshal(&Status{Mountpoint: "/x"})
	if bytes.Contains(b, []byte("blocks_verified")) {
		t.Errorf("a status that is not serving says %s", b)
	}
}
