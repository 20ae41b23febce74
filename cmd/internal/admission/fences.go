package admission

// Fences is what a gate imposes on validation, read from its current
// record: the fence values a manifest must have been built at (at least),
// and the members it must not contain. Validate takes nil when no gate
// applies (no --alias, or the gate does not exist yet).
type Fences struct {
	Gate               string
	Generation         int64
	TombstoneWatermark int64
	BenchmarkFence     int64
	Revoked            map[string]bool // member ids and "blake3:<hex>" digests from every revocation list
	Benchmark          map[string]bool // member ids and digests from every benchmark list
}
