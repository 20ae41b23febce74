package verify

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRemoveStaleSparesLiveWriters: a temporary index is removed only when
// no writer holds its lock and it is older than staleAfter.
func TestRemoveStaleSparesLiveWriters(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-2 * staleAfter)
	mk := func(name string, mtime time.Time) string {
		p := filepath.Join(dir, tmpPrefix+name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dead, live, young := mk("dead", old), mk("live", old), mk("young", time.Now())
	l, err := lockDir(live, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	removeStale(dir)
	for p, want := range map[string]bool{dead: false, live: true, young: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
}
