//go:build race

package mount

// raceEnabled reports a -race build, whose memory use is not a mount's.
const raceEnabled = true
