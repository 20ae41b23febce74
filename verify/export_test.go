package verify

// SetMinChunk sets the smallest chunk ParseTable parses on its own, so
// that tests can split small tables, and returns a function that restores it.
func SetMinChunk(n int) (restore func()) {
	old := minChunk
	minChunk = n
	return func() { minChunk = old }
}
