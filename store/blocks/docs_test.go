package blocks

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
)

// TestDocsNumbers pins the defaults docs/mount.md states to the code: the
// readahead window, the memory tier's front, the read and stall timeouts,
// the window a failed block fails at once.
func TestDocsNumbers(t *testing.T) {
	doc, err := os.ReadFile("../../docs/mount.md")
	if err != nil {
		t.Fatal(err)
	}
	// The mount's defaults: a memory tier of 256 MiB (--cache-mem).
	r, err := New(Config{Objects: struct{ store.ObjectReader }{}, Outboards: struct{ Outboards }{}, MemBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, c := range []struct {
		what string
		re   string
		want int64
	}{
		{"readahead window (blocks)", `doubles\s+up\s+to\s+(\d+)\s+blocks`, r.cfg.aheadBlocks()},
		{"memory tier front (MiB)", `loaded\s+\((\d+)\s+MiB\s+by\s+default`, r.mem.FrontLimit() >> 20},
		{"read timeout (s)", "`--read-timeout`\\s+\\(default\\s+(\\d+)\\s+s", int64(r.cfg.ReadTimeout / time.Second)},
		{"stall timeout (s)", "`--stall-timeout`\\s+\\(default\\s+(\\d+)\\s+s", int64(r.cfg.StallTimeout / time.Second)},
		{"failure window (s)", `for\s+every\s+read\s+of\s+it\s+in\s+the\s+next\s+(\d+)\s+s`, int64(failWindow / time.Second)},
	} {
		m := regexp.MustCompile(c.re).FindSubmatch(doc)
		if m == nil {
			t.Errorf("docs/mount.md no longer states the %s (%s)", c.what, c.re)
			continue
		}
		if got, _ := strconv.ParseInt(string(m[1]), 10, 64); got != c.want {
			t.Errorf("docs/mount.md says the %s is %d; the code's default is %d", c.what, got, c.want)
		}
	}
}
