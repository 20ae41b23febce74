package origin

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store/storetest"
	"github.com/pinfs/pinfs/store/tier"
	"github.com/pinfs/pinfs/verify"
)

// mappingsPerTable bounds the mappings of one table: a section each.
const mappingsPerTable = 8

// TestEvictionUnmaps: block URLs with made-up digests over more snapshots
// than the origin keeps load each, and each one dropped is unmapped: the
// mappings of the index files stay those of the snapshots kept.
func TestEvictionUnmaps(t *testing.T) {
	const keep = 2
	f := newSnapFixture(t, 8, Config{Snapshots: keep}, nil)
	for round := range 3 {
		for s := range f.snaps {
			if resp, _ := get(t, f.block(s, 1, 0, madeUp()), ""); resp.StatusCode != 404 {
				t.Fatalf("made-up digest: %s", resp.Status)
			}
			// A new ordinal each round: the member cache does not answer.
			f.h.snaps.members.Clear()
		}
		kept, loading, open := f.h.snaps.stats()
		if n := storetest.MappingsUnder(t, f.metaDir); n > keep*mappingsPerTable || open > keep || kept > keep || loading != 0 {
			t.Fatalf("round %d: %d mappings of index files, %d snapshots open, %d kept, %d loading; want at most %d tables (%d mappings)",
				round, n, open, kept, loading, keep, keep*mappingsPerTable)
		}
	}
	if n := storetest.MappingsUnder(t, f.metaDir); n == 0 {
		t.Fatal("no mapping of an index at all: the test measures nothing")
	}
}

// TestReferenceKeepsTableMapped: a snapshot a request holds stays mapped
// and readable after the cache dropped it, and is unmapped at release.
func TestReferenceKeepsTableMapped(t *testing.T) {
	ctx := context.Background()
	f := newSnapFixture(t, 3, Config{Snapshots: 1}, nil)
	s0, release0, err := f.h.snaps.get(ctx, f.snaps[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.snaps[1:] {
		_, release, err := f.h.snaps.get(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	if got := s0.Table().Path(1); got != "b/0" {
		t.Fatalf("held snapshot after eviction: path %q", got)
	}
	held := storetest.MappingsUnder(t, f.metaDir)
	if _, _, open := f.h.snaps.stats(); open != 2 {
		t.Fatalf("%d snapshots open, want 2 (the one held, the one kept)", open)
	}
	release0()
	if _, _, open := f.h.snaps.stats(); open != 1 {
		t.Fatalf("%d snapshots open after release, want 1", open)
	}
	if n := storetest.MappingsUnder(t, f.metaDir); n >= held {
		t.Fatalf("%d mappings after release, %d before: the released table is still mapped", n, held)
	}
}

// TestLoadsAreBounded: loads of many snapshots at once run maxLoads at a
// time, and all finish.
func TestLoadsAreBounded(t *testing.T) {
	var g *gate
	f := newSnapFixture(t, 3*maxLoads, Config{}, func(m verify.Getter) verify.Getter { g = newGate(m); return g })
	errs := make(chan error, len(f.snaps))
	for _, d := range f.snaps {
		go func() {
			_, release, err := f.h.snaps.get(context.Background(), d)
			if err == nil {
				release()
			}
			errs <- err
		}()
	}
	eventually(t, "every load started", func() bool { _, loading, _ := f.h.snaps.stats(); return loading == len(f.snaps) })
	eventually(t, "maxLoads loads running", func() bool { in, _, _ := g.counts(); return in == maxLoads })
	g.release()
	for range f.snaps {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if _, most, reads := g.counts(); most != maxLoads || reads != len(f.snaps) {
		t.Fatalf("%d loads at once at most (want %d), %d manifest reads (want %d)", most, maxLoads, reads, len(f.snaps))
	}
}

// TestAbandonedLoadIsCanceled: a load goes on while one of its requests
// waits, and is canceled when the last one's client goes away.
func TestAbandonedLoadIsCanceled(t *testing.T) {
	var g *gate
	f := newSnapFixture(t, 2, Config{}, func(m verify.Getter) verify.Getter { g = newGate(m); return g })
	ask := func(ctx context.Context, s int) chan error {
		done := make(chan error, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", f.block(s, 1, 0, ""), nil)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					err = fmt.Errorf("%s", resp.Status)
				}
			}
			done <- err
		}()
		return done
	}
	// Two requests for snapshot 0; the first goes away, the load goes on.
	ctx1, cancel1 := context.WithCancel(context.Background())
	first := ask(ctx1, 0)
	eventually(t, "the load started", func() bool { in, _, _ := g.counts(); return in == 1 })
	second := ask(context.Background(), 0)
	eventually(t, "the second request waits", func() bool {
		f.h.snaps.mu.Lock()
		defer f.h.snaps.mu.Unlock()
		e := f.h.snaps.loading[f.snaps[0]]
		return e != nil && e.waiters == 2
	})
	cancel1()
	<-first
	if _, _, reads := g.counts(); len(g.canceled) != 0 || reads != 1 {
		t.Fatalf("the load was canceled (or started again: %d reads) when one of its two requests left", reads)
	}
	eventually(t, "the first request left", func() bool {
		f.h.snaps.mu.Lock()
		defer f.h.snaps.mu.Unlock()
		e := f.h.snaps.loading[f.snaps[0]]
		return e == nil || e.waiters == 1
	})
	// Snapshot 1's only client goes away: its load is canceled.
	ctx3, cancel3 := context.WithCancel(context.Background())
	third := ask(ctx3, 1)
	eventually(t, "the second load started", func() bool { in, _, _ := g.counts(); return in == 2 })
	cancel3()
	<-third
	select {
	case <-g.canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the load of a snapshot no one waits for still runs after 10 s")
	}
	g.release()
	if err := <-second; err != nil {
		t.Fatalf("the request that stayed: %v", err)
	}
	if n := len(g.canceled); n != 0 {
		t.Fatalf("%d more loads canceled: the one a request still waited for was", n)
	}
}

// TestUnknownSnapshotStartsNoLoad: a hint naming a snapshot the store does
// not hold costs one look in the store, then none for a while, and never
// a load.
func TestUnknownSnapshotStartsNoLoad(t *testing.T) {
	var g *gate
	f := newSnapFixture(t, 1, Config{}, func(m verify.Getter) verify.Getter { g = newGate(m); return g })
	g.release()
	unknown := "sha256:" + madeUp()
	url := strings.Replace(f.block(0, 1, 0, ""), url2q(string(f.snaps[0])), url2q(unknown), 1)
	for range 3 {
		if resp, body := get(t, url, ""); resp.StatusCode != 404 {
			t.Fatalf("unknown snapshot: %s %s", resp.Status, body)
		}
	}
	if _, _, reads := g.counts(); reads != 0 {
		t.Fatalf("%d loads started for a snapshot the store does not hold", reads)
	}
	if n := f.st.manifestOpens(); n != 1 {
		t.Fatalf("the store was asked %d times for the unknown manifest, want once", n)
	}
	// A known one is loaded.
	if resp, _ := get(t, f.block(0, 1, 0, ""), ""); resp.StatusCode != 200 {
		t.Fatalf("known snapshot: %s", resp.Status)
	}
}

func url2q(s string) string { return strings.ReplaceAll(s, ":", "%3A") }

// TestEmptyMemberAndHugeIndexRefused: an empty member has no block, and a
// block index whose offset does not fit in 63 bits (from 2^43, the URL
// allows 13 digits) is past the end: 404, with no panic and nothing logged
// as an error. A longer index is no block URL (400).
func TestEmptyMemberAndHugeIndexRefused(t *testing.T) {
	f := newSnapFixture(t, 1, Config{}, nil)
	for url, code := range map[string]int{
		f.block(0, 0, 0, ""):             404, // the empty member
		f.block(0, 1, 1, ""):             404, // past the end of the small one
		f.block(0, 1, 1<<43, ""):         404,
		f.block(0, 1, 9000000000000, ""): 404,
		f.block(0, 1, 9999999999999, ""): 404,
		f.block(0, 1, 1<<62, ""):         400,
	} {
		resp, body := get(t, url, "")
		if resp.StatusCode != code || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: %s %s, want %d", url, resp.Status, body, code)
		}
	}
	if resp, _ := get(t, f.block(0, 1, 0, ""), ""); resp.StatusCode != 200 {
		t.Fatalf("block 0 of the small member: %s", resp.Status)
	}
	if s := f.log.String(); s != "" {
		t.Fatalf("logged as errors:\n%s", s)
	}
}

// TestMembersOutliveTheirSnapshot: a member looked up once is answered
// by snapshot and ordinal without loading its snapshot again, and so is
// an ordinal past the end of a snapshot loaded once.
func TestMembersOutliveTheirSnapshot(t *testing.T) {
	var g *gate
	f := newSnapFixture(t, 2, Config{Snapshots: 1}, func(m verify.Getter) verify.Getter { g = newGate(m); return g })
	g.release()
	for _, c := range []struct {
		url   string
		code  int
		loads int
	}{
		{f.block(0, 1, 0, ""), 200, 1},
		{f.block(1, 1, 0, ""), 200, 2}, // drops snapshot 0
		{f.block(0, 1, 0, ""), 200, 2},
		{f.block(0, 1, 0, madeUp()), 404, 2},
		{strings.Replace(f.block(0, 1, 0, ""), "member=1", "member=2", 1), 404, 2},
		{f.block(0, 0, 0, madeUp()), 404, 3}, // a member not looked up yet
	} {
		resp, body := get(t, c.url, "")
		if _, _, reads := g.counts(); resp.StatusCode != c.code || reads != c.loads {
			t.Fatalf("GET %s: %s %s after %d loads; want %d after %d", c.url, resp.Status, body, reads, c.code, c.loads)
		}
	}
}

// TestNotReadyWhenItCannotMap: an origin that cannot map a page (out of
// mappings or memory) is not ready, and is again once it can.
func TestNotReadyWhenItCannotMap(t *testing.T) {
	f := newSnapFixture(t, 1, Config{}, nil)
	old := anonMmap
	anonMmap = func(int, int64, int, int, int) ([]byte, error) { return nil, syscall.ENOMEM }
	resp, body := get(t, f.url+"/"+tier.ReadyPath, "")
	anonMmap = old
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("ready while mmap fails: %s %s", resp.Status, body)
	}
	if resp, body := get(t, f.url+"/"+tier.ReadyPath, ""); resp.StatusCode != 200 {
		t.Fatalf("not ready once mmap works: %s %s", resp.Status, body)
	}
}
