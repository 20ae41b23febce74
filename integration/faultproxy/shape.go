package faultproxy

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"
)

// Shape makes the proxy look like a network link to a remote S3: every
// response waits Latency before its first byte (status and headers), and
// each response's body is paced at Rate bytes per second on its own, as a
// single S3 GET over one connection is (about 100 MB/s); parallel
// responses do not share the cap, so parallel GETs add up as they do
// against S3. The zero Shape forwards at full speed.
type Shape struct {
	Latency time.Duration // added before each response's headers
	Rate    float64       // bytes per second per response body; 0: unpaced
}

// DefaultShape is the bench's link: 20 ms to the first byte, 100 MB/s
// per response.
func DefaultShape() Shape { return Shape{Latency: 20 * time.Millisecond, Rate: 100e6} }

// paceChunk is the most a paced body writes at once (about 0.65 ms at
// 100 MB/s), so that pacing is smooth.
const paceChunk = 64 << 10

// copyBufs holds the body copy buffers, reused across responses so that
// the proxy allocates nothing per request to forward a body.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, paceChunk); return &b }}

// copyBuffered copies src to dst through a pooled buffer.
func copyBuffered(dst io.Writer, src io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	return io.CopyBuffer(onlyWriter{dst}, onlyReader{src}, *bp)
}

// onlyWriter and onlyReader hide ReadFrom and WriteTo, so that
// io.CopyBuffer uses the given buffer (and the pacer sees every chunk).
type onlyWriter struct{ io.Writer }
type onlyReader struct{ io.Reader }

// pacer schedules one response body at rate bytes per second from start:
// the link has carried n bytes at start + n/rate. It is not safe for
// concurrent use; each response has its own.
type pacer struct {
	start time.Time
	rate  float64
	sent  int64
}

// due counts n more bytes and returns the time by which the link has
// carried them: the earliest moment they may reach the client.
func (p *pacer) due(n int) time.Time {
	p.sent += int64(n)
	return p.start.Add(time.Duration(float64(p.sent) / p.rate * float64(time.Second)))
}

// pacedWriter writes a response body in chunks of at most paceChunk,
// each held back until its pacer says the link has carried it, and
// flushed at once. A wait ends early, with an error, when ctx is done or
// the proxy closes.
type pacedWriter struct {
	ctx   context.Context
	done  <-chan struct{}
	w     io.Writer
	rc    *http.ResponseController
	p     pacer
	timer *time.Timer
}

func newPacedWriter(ctx context.Context, done <-chan struct{}, w http.ResponseWriter, rate float64) *pacedWriter {
	return &pacedWriter{ctx: ctx, done: done, w: w, rc: http.NewResponseController(w), p: pacer{start: time.Now(), rate: rate}}
}

func (pw *pacedWriter) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		n := min(len(b), paceChunk)
		if err := pw.wait(pw.p.due(n)); err != nil {
			return written, err
		}
		k, err := pw.w.Write(b[:n])
		written += k
		if err != nil {
			return written, err
		}
		pw.rc.Flush()
		b = b[n:]
	}
	return written, nil
}

// wait sleeps until t.
func (pw *pacedWriter) wait(t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	if pw.timer == nil {
		pw.timer = time.NewTimer(d)
	} else {
		pw.timer.Reset(d)
	}
	select {
	case <-pw.timer.C:
		return nil
	case <-pw.ctx.Done():
		return pw.ctx.Err()
	case <-pw.done:
		return http.ErrAbortHandler
	}
}

// stop releases the writer's timer.
func (pw *pacedWriter) stop() {
	if pw.timer != nil {
		pw.timer.Stop()
	}
}

// delay waits the shape's latency, or until the request or the proxy
// ends, which it reports as false.
func (p *Proxy) delay(ctx context.Context) bool {
	if p.opts.Shape.Latency <= 0 {
		return true
	}
	t := time.NewTimer(p.opts.Shape.Latency)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-p.done:
	}
	return false
}
