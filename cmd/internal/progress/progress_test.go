package progress

import (
	"bytes"
	"strings"
	"testing"
)

// TestNotATerminal checks that off a terminal the bar prints a line per
// tenth done, and the final state, in order, and that quiet prints nothing.
func TestNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, "replay", 100, 1000, false)
	for i := 1; i <= 100; i++ {
		b.Update(i, int64(i*10))
	}
	b.Done()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 10 { // 10%, 20%, … 100%, which is the final line too
		t.Fatalf("%d lines, want 10:\n%s", len(lines), buf.String())
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "100%") || !strings.Contains(last, "100/100 members") || !strings.Contains(last, "1000/1000 bytes") {
		t.Errorf("final line %q", last)
	}
	buf.Reset()
	half := New(&buf, "replay", 10, 100, false)
	half.Update(5, 50)
	half.Done()
	if got := strings.Count(buf.String(), "\n"); got != 1 || !strings.Contains(buf.String(), " 50%") {
		t.Errorf("a bar done at 50%% printed %q, want one line at 50%%", buf.String())
	}
	var quiet bytes.Buffer
	q := New(&quiet, "replay", 10, 10, true)
	q.Update(10, 10)
	q.Done()
	if quiet.Len() != 0 {
		t.Errorf("quiet bar printed %q", quiet.String())
	}
}

// TestETA checks the time left: bytes left over the rate, rounded, and
// none when nothing is left or nothing has moved.
func TestETA(t *testing.T) {
	for _, c := range []struct {
		left int64
		rate float64
		want string
		ok   bool
	}{
		{100e6, 10e6, "10s", true},
		{1, 10e6, "0s", true},
		{0, 10e6, "", false},
		{100, 0, "", false},
	} {
		got, ok := eta(c.left, c.rate)
		if ok != c.ok || ok && got.String() != c.want {
			t.Errorf("eta(%d, %g) = %v, %v; want %s, %v", c.left, c.rate, got, ok, c.want, c.ok)
		}
	}
	var buf bytes.Buffer
	b := New(&buf, "warm", 2, 2000, false)
	b.Update(1, 1000)
	if !strings.Contains(buf.String(), "ETA ") {
		t.Errorf("a bar half done shows no ETA: %q", buf.String())
	}
}

// TestFinalCount checks that the final line off a terminal shows the last
// item count even when the bytes reached 100 % before the last item was
// counted (the last member's bytes are reported before the member).
func TestFinalCount(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, "warm", 2, 1000, false)
	b.Update(1, 1000)
	b.Update(2, 1000)
	b.Done()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "2/2 members") {
		t.Errorf("final line %q; want 2/2 members", last)
	}
}
