package runs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/cmd/internal/pin"
	"github.com/pinfs/pinfs/store/localstore"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// pinnedTable pins files into a local store under dir and returns the
// store and the snapshot's member table (in path order: a, b, big).
func pinnedTable(t *testing.T, dir string, files map[string]string) (*localstore.Store, *verify.Table) {
	t.Helper()
	src := t.TempDir()
	for name, c := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st, err := localstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := (&pin.Pinner{Store: st}).Dir(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	c, err := verify.Fetch(ctx, st, d)
	if err != nil {
		t.Fatal(err)
	}
	return st, c.Table
}

// casFile returns the file that holds content in a local store under dir.
func casFile(dir, content string) string {
	return filepath.Join(dir, filepath.FromSlash(verify.CASKey(b3.Of([]byte(content)).Hex())))
}

func TestReplayVerifiesTheMembersGiven(t *testing.T) {
	files := map[string]string{"a": "alpha", "b": "bravo!", "big": strings.Repeat("0123456789", 20_000)}
	dir := t.TempDir()
	st, tab := pinnedTable(t, dir, files)
	ctx := context.Background()

	var calls, done int
	var bytes int64
	ps, err := Replay(ctx, st, tab, []int{0, 2}, 0, func(d int, b int64) { calls, done, bytes = calls+1, d, b })
	if err != nil || len(ps) != 0 {
		t.Fatalf("intact: %v, %v", ps, err)
	}
	if calls != 2 || done != 2 || bytes != int64(len(files["a"])+len(files["big"])) {
		t.Fatalf("progress: %d calls, last %d members %d bytes", calls, done, bytes)
	}

	// "b" loses its bytes, "big" has one flipped: each named once, in the
	// order given; "a" still replays.
	if err := os.Remove(casFile(dir, files["b"])); err != nil {
		t.Fatal(err)
	}
	p := casFile(dir, files["big"])
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 1
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ps, err = Replay(ctx, st, tab, []int{2, 0, 1}, 2, nil)
	if err != nil || len(ps) != 2 {
		t.Fatalf("damaged: %v, %v", ps, err)
	}
	if ps[0].Path != "big" || ps[0].Kind != verify.KindMismatch || ps[1].Path != "b" || ps[1].Kind != verify.KindMissing {
		t.Fatalf("problems %v", ps)
	}
	if ps, err := Replay(ctx, st, tab, []int{0}, 1, nil); err != nil || len(ps) != 0 {
		t.Fatalf("a alone: %v, %v", ps, err)
	}

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if ps, err := Replay(canceled, st, tab, []int{0, 1, 2}, 1, nil); err == nil {
		t.Fatalf("canceled replay: %v, no error", ps)
	}
	if _, err := Replay(ctx, st, tab, []int{3}, 1, nil); err == nil {
		t.Fatal("index 3 of 3 members accepted")
	}
}
