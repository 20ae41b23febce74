package mount

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/fs"
)

// TestDocsNumbers pins the memory limit docs/mount.md states to the
// constants limitMemory uses.
func TestDocsNumbers(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/mount.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		re   string
		want int64
	}{
		{"go-fuse node per member (bytes)", `(\d+)\s+bytes\s+per\s+member\s+\(what\s+go-fuse`, nodeBytes},
		{"memory headroom (MiB)", `\+\s+(\d+)\s+MiB\s+\(` + "`GOMEMLIMIT`", memoryHeadroom >> 20},
	} {
		m := regexp.MustCompile(c.re).FindSubmatch(doc)
		if m == nil {
			t.Errorf("docs/mount.md no longer states the %s (%s)", c.what, c.re)
			continue
		}
		if got, _ := strconv.ParseInt(string(m[1]), 10, 64); got != c.want {
			t.Errorf("docs/mount.md says the %s is %d; the code's is %d", c.what, got, c.want)
		}
	}
}

// TestDocsPassthroughReasons: docs/mount.md lists each reason passthrough
// can be off for as the log line gives it.
func TestDocsPassthroughReasons(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/mount.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{fs.ReasonDisabled, fs.ReasonNoDisk, fs.ReasonKernel, fs.ReasonNoAdmin, fs.ReasonStacked, fs.ReasonRefused} {
		if !strings.Contains(string(doc), "`passthrough off` `reason=\""+r+"\"`") {
			t.Errorf("docs/mount.md lacks the log line passthrough off reason=%q", r)
		}
	}
}
