package storetest

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// LogLines runs f with a JSON logger and returns the fields of each line
// it logged.
func LogLines(t testing.TB, f func(*slog.Logger)) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	f(slog.New(slog.NewJSONHandler(&buf, nil)))
	var lines []map[string]any
	for l := range strings.Lines(buf.String()) {
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log %q: %v", l, err)
		}
		lines = append(lines, line)
	}
	return lines
}
