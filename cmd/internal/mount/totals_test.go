package mount

import (
	"testing"

	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/store/blocks"
)

// TestTotals: run_end carries every counter of the block reader it has a
// field for, version_missing and fetch_failed included.
func TestTotals(t *testing.T) {
	st := blocks.Stats{BytesServed: 1, BlocksVerified: 2, MemHits: 3, DiskHits: 4, NetworkFetches: 5,
		Mismatches: 6, VersionMissing: 7, FetchFailed: 8}
	got := *totals(st, 9)
	want := runrecord.Totals{MembersOpened: 9, BytesServed: 1, BlocksVerified: 2, MemHits: 3, DiskHits: 4,
		NetworkFetches: 5, Mismatches: 6, VersionMissing: 7, FetchFailed: 8}
	if got != want {
		t.Fatalf("totals = %+v; want %+v", got, want)
	}
}
