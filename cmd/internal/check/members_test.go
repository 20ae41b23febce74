package check

import (
	"context"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// table loads the member table of snapshot d.
func table(t *testing.T, st verify.Getter, d verify.Digest) *verify.Table {
	t.Helper()
	c, err := verify.Fetch(context.Background(), st, d)
	if err != nil {
		t.Fatal(err)
	}
	return c.Table
}

func TestMembersChecksOnlyTheListAndReportsProgress(t *testing.T) {
	dir := t.TempDir()
	st, d, files := pinned(t, dir)
	tab := table(t, st, d)
	big := -1
	for i := range tab.Len() {
		if tab.Path(i) == "big" {
			big = i
		}
	}
	// Damage "big" at rest: a deep check of it fails, of "a" alone passes.
	rewrite(t, blobPath(dir, verify.CASKey(b3.Of([]byte(files["big"])).Hex())), func(b []byte) []byte { b[7] ^= 1; return b })
	a := 1 - big
	var calls []int
	var last int64
	ps, err := Members(context.Background(), st, tab, []int{a}, Options{Deep: true}, func(done int, bytes int64) {
		calls = append(calls, done)
		last = bytes
	})
	if err != nil || len(ps) != 0 {
		t.Fatalf("member a: %v, %v", ps, err)
	}
	if len(calls) != 1 || calls[0] != 1 || last != int64(len(files["a"])) {
		t.Fatalf("progress calls %v, last bytes %d", calls, last)
	}
	calls = nil
	ps, err = Members(context.Background(), st, tab, []int{big, a, big}, Options{Deep: true, Jobs: 2}, func(done int, bytes int64) {
		calls = append(calls, done)
		last = bytes
	})
	if err != nil || len(ps) != 2 || ps[0].Kind != verify.KindMismatch || ps[0].Path != "big" || ps[1].Path != "big" {
		t.Fatalf("big, a, big: %v, %v", ps, err)
	}
	if len(calls) != 3 || calls[2] != 3 || last != int64(2*len(files["big"])+len(files["a"])) {
		t.Fatalf("progress calls %v, last bytes %d", calls, last)
	}
	// The shallow check of the same list passes: the size is right.
	if ps, err := Members(context.Background(), st, tab, []int{big}, Options{}, nil); err != nil || len(ps) != 0 {
		t.Fatalf("shallow: %v, %v", ps, err)
	}
}

func TestMembersRefusesBadIndicesAndEndedContexts(t *testing.T) {
	st, d, _ := pinned(t, t.TempDir())
	tab := table(t, st, d)
	for _, idx := range [][]int{{2}, {-1}, {0, 99}} {
		if _, err := Members(context.Background(), st, tab, idx, Options{Deep: true}, nil); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Fatalf("%v: %v", idx, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ps, err := Members(ctx, st, tab, []int{0, 1}, Options{Deep: true}, nil); err == nil {
		t.Fatalf("canceled: %v, nil error", ps)
	}
}

func TestMembersNamesAMemberWithoutAnObject(t *testing.T) {
	tab := verify.NewTable([]verify.Member{{ID: "x", Path: "x", Size: 1, Digest: "blake3:zz"}})
	st, _, _ := pinned(t, t.TempDir())
	ps, err := Members(context.Background(), st, tab, []int{0}, Options{Deep: true}, nil)
	if err != nil || len(ps) != 1 || ps[0].Kind != verify.KindBadMember {
		t.Fatalf("%v, %v", ps, err)
	}
}
