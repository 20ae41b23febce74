package verify

import "io"

// SetMinChunk sets the smallest chunk ParseTable parses on its own, so
// that tests can split small tables, and returns a function that restores it.
func SetMinChunk(n int) (restore func()) {
	old := minChunk
	minChunk = n
	return func() { minChunk = old }
}

// ParseTableFrom is ParseTable for a table read from r, in chunks.
func ParseTableFrom(r io.Reader) (*Table, error) {
	t, _, err := parseTableFrom(r, io.Discard, &memSink{}, &header{})
	return t, err
}

// ParseTableProblems is ParseTable with the member checks run as the
// table is parsed: the problems the streamed path reports.
func ParseTableProblems(table []byte) (*Table, []Problem, error) {
	return parseTable(table, &memSink{}, nil)
}
