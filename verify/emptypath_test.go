package verify_test

import (
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
)

// TestParseTableEmptyPathAcrossChunks: a table whose first chunk ends in
// the empty path still needs the next chunk's first path to come after
// it; an empty path repeated across a chunk boundary is not a table.
func TestParseTableEmptyPathAcrossChunks(t *testing.T) {
	defer verify.SetMinChunk(64)()
	m := casMember("")
	line := string(m.AppendCanonical(nil)) + "\n"
	if len(line) <= 64 {
		t.Fatalf("line of %d bytes would not end a chunk", len(line))
	}
	for name, parse := range tableParsers {
		if _, err := parse([]byte(line + line)); err == nil || !strings.Contains(err.Error(), "line 2: path") {
			t.Errorf("%s: the empty path twice, one per chunk: error %v", name, err)
		}
	}
}
