package blocks

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/pinfs/pinfs/store/cache"
)

// Sequential readers are served by spans: one ranged request for several
// consecutive blocks, verified and released block by block as the bytes
// arrive. Per-request costs (HTTP round trip, the server's open and
// metadata reads) dominate at 1 MiB; on loopback versitygw, 4 MiB requests
// deliver about 1.7 times the throughput of 1 MiB ones (see the README).

// startSpan starts one flight per block for up to n consecutive blocks of
// m from block i that are neither loading nor cached (cached blocks load
// one by one, from their tier), fetched with one request, and returns the
// flight of block i and the number of blocks it covers. It falls back to
// start when fewer than two blocks qualify. ahead marks a readahead span,
// which needs a readahead token and returns nil when none is free.
func (r *Reader) startSpan(m *Member, i, n int64, ahead bool) (*flight, int64) {
	last := min(i+n, numBlocks(m.Size)) - 1
	r.mu.Lock()
	if _, ok := r.flights[key(m, i)]; ok || r.closed || last <= i || r.disk.Has(key(m, i)) {
		r.mu.Unlock()
		return r.start(m, i, ahead), 1
	}
	var fs []*flight
	for j := i; j <= last; j++ {
		k := key(m, j)
		if _, ok := r.flights[k]; ok || (j > i && (r.disk.Has(k) || r.inMem(k))) {
			break
		}
		fs = append(fs, nil)
	}
	if len(fs) < 2 {
		r.mu.Unlock()
		return r.start(m, i, ahead), 1
	}
	if ahead {
		select {
		case r.ahead <- struct{}{}:
			r.st.readaheads.Add(1)
		default:
			r.mu.Unlock()
			return nil, 0
		}
	}
	for j := range fs {
		fs[j] = &flight{done: make(chan struct{})}
		r.flights[key(m, i+int64(j))] = fs[j]
	}
	r.wg.Add(1)
	r.mu.Unlock()
	mm := *m
	go r.flySpan(fs, &mm, i, ahead)
	return fs[0], int64(len(fs))
}

// flySpan fetches the blocks of fs (blocks i, i+1, ...) with one request
// and completes each flight as soon as its block is verified. A block that
// cannot be read or verified from the span's response, and every block
// after it, is loaded on its own (load), with its retries, refetch and
// events.
func (r *Reader) flySpan(fs []*flight, m *Member, i int64, ahead bool) {
	defer r.wg.Done()
	if ahead {
		defer func() { <-r.ahead }()
	}
	done := 0
	func() {
		off, _ := blockRange(m, i)
		lastOff, lastN := blockRange(m, i+int64(len(fs))-1)
		total := lastOff + lastN - off
		v := &verifier{r: r, m: m}
		if err := v.loadOutboard(r.ctx); err != nil {
			return
		}
		ctx, cancel := context.WithCancel(r.ctx)
		defer cancel()
		w := &watchdog{cancel: cancel}
		t := time.AfterFunc(r.cfg.StallTimeout, w.fire)
		defer t.Stop()
		defer w.close()
		r.st.requests.Add(1)
		r.st.fetches.Add(int64(len(fs)))
		rc, err := r.cfg.Objects.ReadRange(ctx, m.Object, off, total)
		if err != nil {
			return
		}
		w.setBody(rc)
		for j := range fs {
			v.off, v.n = blockRange(m, i+int64(j))
			buf := make([]byte, v.n)
			if err := readFull(rc, buf, func() { t.Reset(r.cfg.StallTimeout) }); err != nil {
				return
			}
			if err := v.verify(buf); err != nil {
				return // load fetches it again, reports and heals
			}
			r.st.verified.Add(1)
			r.complete(fs[j], m, i+int64(j), buf, fromNetwork, nil)
			done++
		}
	}()
	for j := done; j < len(fs); j++ {
		b, src, err := r.load(r.ctx, m, i+int64(j))
		r.complete(fs[j], m, i+int64(j), b, src, err)
	}
	if r.mem != nil {
		r.mem.Wait()
	}
	r.mu.Lock()
	for j := range fs {
		delete(r.flights, key(m, i+int64(j)))
	}
	r.mu.Unlock()
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
		if err := r.disk.Put(k, data); err != nil {
			r.st.diskErrors.Add(1)
		}
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
