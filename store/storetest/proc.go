package storetest

import (
	"bufio"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Parked counts the goroutines of this process parked (blocked, neither
// running nor runnable) with fn in their stack, such as
// "origin.(*Handler).acquire": a test waits for them to be there before it
// frees what they wait for, instead of guessing the moment with a sleep.
func Parked(fn string) int {
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

// WaitParked waits, at most 10 s, until n goroutines are Parked in fn.
func WaitParked(t testing.TB, fn string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for Parked(fn) < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d goroutines parked in %s after 10 s", n, fn)
		}
		time.Sleep(time.Millisecond)
	}
}

// MappingsUnder counts this process's mappings of files under dir
// (deleted ones included), from /proc/self/maps.
func MappingsUnder(t testing.TB, dir string) int {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), dir+"/") {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}
