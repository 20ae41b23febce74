package blocks

import (
	"runtime"
	"strings"
)

// parked counts the goroutines parked (blocked, neither running nor
// runnable) with fn in their stack, such as "blocks.(*Reader).settle": a
// test waits for them to be there (waitFor) before it frees what they
// wait for, instead of guessing the moment with a sleep.
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
