package origin

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// waitParked waits, at most 10 s, until n goroutines are parked (blocked,
// neither running nor runnable) with fn in their stack, such as
// "origin.(*Handler).acquire": the event a test needs before it frees
// what they wait for, observed instead of guessed with a sleep.
func waitParked(t testing.TB, fn string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for parked(fn) < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d goroutines parked in %s after 10 s", n, fn)
		}
		time.Sleep(time.Millisecond)
	}
}

// parked counts the goroutines parked with fn in their stack.
func parked(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		head, _, _ := strings.Cut(g, "\n") // goroutine 7 [select]:
		if strings.Contains(g, fn) && !strings.Contains(head, "[running") && !strings.Contains(head, "[runnable") {
			count++
		}
	}
	return count
}
