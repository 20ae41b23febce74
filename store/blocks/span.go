package blocks

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/cache"
)

// Sequential readers are served by spans: one ranged request for several
// consecutive blocks, verified and released block by block as the bytes
// arrive. Per-request costs (HTTP round trip, the server's open and
// metadata reads) dominate at 1 MiB: on loopback versitygw, raw 4-8 MiB
// GETs deliver about 1.7 times the throughput of 1 MiB ones, and a cold
// 1 GiB read through pinfs went from 0.48 to 0.8 GB/s (and versitygw's CPU
// per GB halved) when spans grew from ~1.9 MiB to aligned 8 MiB.

// startSpan starts a span for block i of m and returns the flight of block
// i and the last block the span covers. The span is the run of blocks
// around i, within i's group of SpanBlocks aligned blocks (and not before
// from), that are neither loading nor cached: concurrent reads of one
// group (the kernel sends a sequential reader's readahead in parallel)
// then share one request instead of splitting it. Cached blocks load one
// by one from their tier. It falls back to start when the span would be a
// single block. ahead marks a readahead span, which needs a readahead
// token and returns a nil flight when none is free. The span ends by
// deadline.
func (r *Reader) startSpan(m *Member, i, from int64, ahead bool, deadline time.Time) (*flight, int64) {
	size := int64(r.cfg.SpanBlocks)
	group := i - i%size
	r.mu.Lock()
	free := func(j int64) bool {
		k := key(m, j)
		_, flying := r.flights[k]
		return !flying && !r.disk.Has(k) && !r.inMem(k)
	}
	if _, ok := r.flights[key(m, i)]; ok || r.closed || r.disk.Has(key(m, i)) {
		r.mu.Unlock()
		return r.start(m, i, ahead, deadline), i
	}
	first, last := i, i
	for first > max(group, from) && free(first-1) {
		first--
	}
	for last < min(group+size, numBlocks(m.Size))-1 && free(last+1) {
		last++
	}
	if first == last {
		r.mu.Unlock()
		return r.start(m, i, ahead, deadline), i
	}
	if ahead {
		select {
		case r.ahead <- struct{}{}:
			r.st.readaheads.Add(1)
		default:
			r.mu.Unlock()
			return nil, i
		}
	}
	fs := make([]*flight, last-first+1)
	for j := range fs {
		fs[j] = &flight{done: make(chan struct{}), deadline: deadline}
		r.flights[key(m, first+int64(j))] = fs[j]
	}
	r.wg.Add(1)
	r.mu.Unlock()
	mm := *m
	go r.flySpan(fs, &mm, first, ahead)
	return fs[i-first], last
}

// flySpan fetches the blocks of fs (blocks i, i+1, ...) with one request
// and completes each flight as soon as its block is verified. A block
// whose copy fails verification is settled after the request as load
// settles one (fromNetwork: fetched again alone, one event once the
// outcome is known); every block after a failed read is loaded on its own
// (load), with its retries, refetch and events.
func (r *Reader) flySpan(fs []*flight, m *Member, i int64, ahead bool) {
	defer r.wg.Done()
	if ahead {
		defer func() { <-r.ahead }()
	}
	fctx, fcancel := context.WithDeadline(r.ctx, fs[0].deadline)
	defer fcancel()
	completed := make([]bool, len(fs))
	type badCopy struct {
		b   []byte
		err error
	}
	bad := make([]*badCopy, len(fs))
	var ob []byte // the outboard the span was verified with
	func() {
		off, _ := blockRange(m, i)
		lastOff, lastN := blockRange(m, i+int64(len(fs))-1)
		total := lastOff + lastN - off
		v := &verifier{r: r, m: m}
		if err := v.loadOutboard(fctx); err != nil {
			return
		}
		ob = v.outboard
		if err := r.lim.wait(fctx); err != nil {
			return
		}
		ctx, cancel := context.WithCancel(fctx)
		defer cancel()
		w := &watchdog{cancel: cancel}
		t := time.AfterFunc(r.cfg.StallTimeout, w.fire)
		defer t.Stop()
		defer w.close()
		r.st.requests.Add(1)
		rc, err := r.cfg.Objects.ReadRange(ctx, m.Object, off, total)
		if errors.Is(err, store.ErrThrottled) {
			r.lim.throttled()
		}
		if err != nil {
			return
		}
		r.lim.ok()
		w.setBody(rc)
		for j := range fs {
			v.off, v.n = blockRange(m, i+int64(j))
			buf := make([]byte, v.n)
			if err := readFull(rc, buf, func() { t.Reset(r.cfg.StallTimeout) }); err != nil {
				return // the rest load on their own, with retries
			}
			r.st.fetches.Add(1)
			if err := v.verify(buf); err != nil {
				bad[j] = &badCopy{buf, err} // settled after the request
				continue
			}
			r.st.verified.Add(1)
			r.complete(fs[j], m, i+int64(j), buf, fromNetwork, nil)
			completed[j] = true
		}
	}()
	for j, ok := range completed {
		switch {
		case ok:
		case bad[j] != nil:
			off, n := blockRange(m, i+int64(j))
			v := &verifier{r: r, m: m, off: off, n: n, outboard: ob}
			b, err := r.fromNetwork(fctx, v, bad[j].b, bad[j].err, "copy in a span request")
			if err == nil {
				r.st.verified.Add(1)
			}
			r.complete(fs[j], m, i+int64(j), b, fromNetwork, err)
		default:
			b, src, err := r.load(fctx, m, i+int64(j))
			r.complete(fs[j], m, i+int64(j), b, src, err)
		}
	}
	if r.mem != nil {
		r.mem.Wait()
	}
	r.forget(m, i, fs...)
}

// complete hands a loaded block to the memory tier and f's waiters, then
// to the disk tier.
func (r *Reader) complete(f *flight, m *Member, i int64, data []byte, src source, err error) {
	k := key(m, i)
	if err == nil {
		r.recent.put(k, data)
	}
	if err == nil && src != fromMem && r.mem != nil {
		r.mem.Put(k, data)
	}
	f.data, f.err = data, err
	close(f.done)
	if err == nil && src == fromNetwork && r.disk != nil {
		_ = r.disk.Put(k, data) // best effort: the tier counts and logs a failure
	}
}

// inMem reports whether memory holds k (without counting a hit).
func (r *Reader) inMem(k cache.Key) bool {
	if _, ok := r.recent.get(k); ok {
		return true
	}
	if r.mem == nil {
		return false
	}
	_, ok := r.mem.Get(k)
	return ok
}

// readFull fills buf from rc, calling progress whenever bytes arrive.
func readFull(rc io.Reader, buf []byte, progress func()) error {
	have := 0
	for have < len(buf) {
		n, err := rc.Read(buf[have:])
		if n > 0 {
			have += n
			progress()
		}
		if err != nil && have < len(buf) {
			if errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}
