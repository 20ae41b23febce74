package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDemoStepsHaveHeaders: every pinfs command that demo/demo.sh runs
// for its output follows a step header that names it ("$ pinfs key
// generate …"), so that its output does not run into the previous
// step's. Cleanup (a trap, "|| true") is exempt.
func TestDemoStepsHaveHeaders(t *testing.T) {
	b, err := os.ReadFile("../../demo/demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	step := regexp.MustCompile(`^step "\$pinfs ((?:[a-z]+ ?)+)`)
	call := regexp.MustCompile(`\$pinfs ((?:[a-z]+ ?)+)`)
	header, calls := "", 0
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "step "):
			header = ""
			if m := step.FindStringSubmatch(line); m != nil {
				header = strings.TrimSpace(m[1])
			}
		case strings.HasPrefix(line, "#") || strings.HasPrefix(line, "pinfs=") || strings.Contains(line, "trap ") || strings.Contains(line, "|| true"):
		default:
			for _, m := range call.FindAllStringSubmatch(line, -1) {
				calls++
				if cmd := strings.TrimSpace(m[1]); header == "" || !strings.HasPrefix(cmd, header) && !strings.HasPrefix(header, cmd) {
					t.Errorf("demo/demo.sh:%d runs pinfs %s under the step header %q: give it a step of its own", i+1, cmd, header)
				}
			}
		}
	}
	if calls < 10 {
		t.Fatalf("found %d pinfs calls in demo/demo.sh; the test no longer reads it right", calls)
	}
}
