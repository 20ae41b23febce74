package pin

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Progress prints one self-overwriting progress line (objects and bytes
// hashed) to a terminal. A nil *Progress is quiet; all methods are safe
// for concurrent use.
type Progress struct {
	W io.Writer

	mu           sync.Mutex
	objs, total  int
	bytes, bsize int64
	last         time.Time
}

// Start sets the totals.
func (p *Progress) Start(objects int, bytes int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total, p.bsize = objects, bytes
}

// Add counts objects and bytes done, printing at most five times a second.
func (p *Progress) Add(objects int, bytes int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.objs += objects
	p.bytes += bytes
	if time.Since(p.last) > 200*time.Millisecond {
		p.last = time.Now()
		p.print()
	}
}

// Done prints the final count and ends the line.
func (p *Progress) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.print()
	fmt.Fprintln(p.W)
}

func (p *Progress) print() {
	fmt.Fprintf(p.W, "\rhashed %d/%d objects, %.1f/%.1f MiB", p.objs, p.total,
		float64(p.bytes)/(1<<20), float64(p.bsize)/(1<<20))
}
