// Package progress draws a one-line progress bar for long commands such
// as pinfs run replay and pinfs warm: redrawn in place on a terminal, a line every ten
// percent otherwise (a CI log, a pipe), nothing when quiet.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Bar reports how many of a known number of items and bytes are done.
// Update may be called from many goroutines.
type Bar struct {
	w           io.Writer
	label       string
	items       int
	bytes       int64
	tty, quiet  bool
	start       time.Time
	mu          sync.Mutex
	done        int
	doneBytes   int64
	lastDraw    time.Time
	lastPercent int
	lastDone    int // items in the last line drawn
}

// New returns a bar for items items of bytes bytes in total, drawn on w.
func New(w io.Writer, label string, items int, bytes int64, quiet bool) *Bar {
	b := &Bar{w: w, label: label, items: items, bytes: bytes, quiet: quiet, start: time.Now(), lastPercent: -1}
	if f, ok := w.(*os.File); ok {
		_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
		b.tty = err == nil
	}
	return b
}

// Update records that done items and doneBytes bytes are finished so far.
func (b *Bar) Update(done int, doneBytes int64) {
	if b.quiet {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done, b.doneBytes = max(b.done, done), max(b.doneBytes, doneBytes)
	b.draw(false)
}

// Done draws the final state and ends the line.
func (b *Bar) Done() {
	if b.quiet {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.draw(true)
	if b.tty {
		fmt.Fprintln(b.w)
	}
}

// draw prints the bar: on a terminal at most ten times a second, else
// when another tenth is done; when final, unless that line is out.
func (b *Bar) draw(final bool) {
	percent := 100
	if b.bytes > 0 {
		percent = int(b.doneBytes * 100 / b.bytes)
	} else if b.items > 0 {
		percent = b.done * 100 / b.items
	}
	now := time.Now()
	switch {
	case final && !b.tty && percent == b.lastPercent && b.done == b.lastDone:
		return // that line is out already
	case final:
	case b.tty && now.Sub(b.lastDraw) < 100*time.Millisecond:
		return
	case !b.tty && percent/10 == b.lastPercent/10:
		return
	}
	b.lastDraw, b.lastPercent, b.lastDone = now, percent, b.done
	const width = 30
	fill := strings.Repeat("#", percent*width/100) + strings.Repeat(".", width-percent*width/100)
	rate := float64(b.doneBytes) / max(now.Sub(b.start).Seconds(), 1e-3) // bytes per second
	line := fmt.Sprintf("%s [%s] %3d%%  %d/%d members  %d/%d bytes  %.1f MB/s", b.label, fill, percent, b.done, b.items, b.doneBytes, b.bytes, rate/1e6)
	if eta, ok := eta(b.bytes-b.doneBytes, rate); ok {
		line += "  ETA " + eta.String()
	}
	if b.tty {
		fmt.Fprintf(b.w, "\r%s", line)
		return
	}
	fmt.Fprintln(b.w, line)
}

// eta returns the time left for left bytes at rate bytes per second,
// rounded to the second; false when nothing is left or nothing moved yet.
func eta(left int64, rate float64) (time.Duration, bool) {
	if left <= 0 || rate <= 0 {
		return 0, false
	}
	return time.Duration(float64(left) / rate * float64(time.Second)).Round(time.Second), true
}
