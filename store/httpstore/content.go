package httpstore

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/tier"
	"github.com/pinfs/pinfs/verify/b3"
)

// part is the bytes [from, to) of one block, relative to the block.
type part struct {
	block    tier.Block
	from, to int64
	whole    bool // the whole block: no Range
	size     int64
}

// ReadContent returns length bytes (< 0: to the end) of the member c from
// off, as GETs of the block URLs that cover them, read in order through
// one reader. Up to Ahead blocks are requested at once: a cold tier asks
// the origin for them in parallel, so a range of many blocks takes about
// one block's round trip through the tier, the origin and its store, not
// one per block. Their bodies wait in the connections (the tier reads its
// upstream into its cache regardless), not in memory here. A range that
// starts or ends inside a block asks for its part with a Range header.
// fresh sends tier.BypassHeader with every request. The first block's
// failure is ReadContent's error, a later one the reader's; a body cut
// short is io.ErrUnexpectedEOF. The bytes are not verified: store/blocks
// does that.
func (s *Store) ReadContent(ctx context.Context, c store.Content, off, length int64, fresh bool) (io.ReadCloser, error) {
	hx, ok := strings.CutPrefix(c.Digest, "blake3:")
	if !ok || len(hx) != 64 {
		return nil, fmt.Errorf("httpstore: member %q: not a blake3:<64 hex> digest", c.Digest)
	}
	if length < 0 {
		length = c.Size - off
	}
	if off < 0 || length < 0 || off+length > c.Size {
		return nil, fmt.Errorf("httpstore: read %s [%d, +%d): outside its %d bytes", c.Digest, off, length, c.Size)
	}
	parts := plan(tier.Block{Hex: hx, Snapshot: c.Snapshot, Member: c.Index}, c.Size, off, off+length)
	if len(parts) == 0 {
		return io.NopCloser(strings.NewReader("")), nil
	}
	ctx, cancel := context.WithCancel(ctx)
	body, err := s.openPart(ctx, parts[0], fresh)
	if err != nil {
		cancel()
		return nil, err
	}
	r := &blockReader{s: s, ctx: ctx, cancel: cancel, fresh: fresh, parts: parts, cur: body, started: 1}
	r.fill()
	return r, nil
}

// Ahead is how many blocks one ReadContent has requested at most at once,
// the one being read included.
const Ahead = 8

// plan returns the parts of the blocks that cover [off, end) of a member
// of size bytes.
func plan(b tier.Block, size, off, end int64) []part {
	var parts []part
	for i := off / tier.BlockSize; i*tier.BlockSize < end; i++ {
		start := i * tier.BlockSize
		bsize := min(tier.BlockSize, size-start)
		p := part{block: b, from: max(off, start) - start, to: min(end, start+bsize) - start, size: bsize}
		p.block.Index = i
		p.whole = p.from == 0 && p.to == bsize
		parts = append(parts, p)
	}
	return parts
}

// openPart GETs p and checks that the answer holds exactly its bytes.
func (s *Store) openPart(ctx context.Context, p part, fresh bool) (io.ReadCloser, error) {
	u := s.root + p.block.Path() + "?" + p.block.Query()
	rng := ""
	if !p.whole {
		rng = "bytes=" + strconv.FormatInt(p.from, 10) + "-" + strconv.FormatInt(p.to-1, 10)
	}
	resp, err := s.do(ctx, u, rng, fresh)
	if err != nil {
		return nil, err
	}
	n := p.to - p.from
	bad, short := "", false
	switch {
	case resp.ContentLength >= 0 && resp.ContentLength != n:
		bad, short = "Content-Length "+strconv.FormatInt(resp.ContentLength, 10)+", want "+strconv.FormatInt(n, 10), true
	case p.whole && resp.ContentLength < 0:
		bad = "no Content-Length"
	case !p.whole:
		want := fmt.Sprintf("bytes %d-%d/%d", p.from, p.to-1, p.size)
		got := resp.Header.Get("Content-Range")
		if got != want {
			bad = fmt.Sprintf("Content-Range %q, want %q", got, want)
			short = strings.HasPrefix(got, "bytes ") && !strings.HasSuffix(got, "/"+strconv.FormatInt(p.size, 10))
		}
	}
	switch {
	case short:
		resp.Body.Close()
		return nil, fmt.Errorf("httpstore: GET %s (Range %q): %s: %w", u, rng, bad, ErrWrongLength)
	case bad != "":
		resp.Body.Close()
		return nil, fmt.Errorf("httpstore: GET %s (Range %q): %s: %w", u, rng, bad, store.ErrBadResponse)
	}
	return store.ExactReader(resp.Body, n), nil
}

// ErrWrongLength is the error of a block whose copy in the tier has
// another length than the block's (a Content-Length, or the total of a
// Content-Range, that is not the block's size): a truncated cache file,
// or a copy of other bytes. It wraps b3.ErrMismatch, since no copy of that
// length can be the block: the block reader treats it as a bad copy
// (fetched again bypassing the tier's cache, then a "mismatch" event
// From "tier"), not as a failure of the store.
var ErrWrongLength = fmt.Errorf("the tier's copy of the block has the wrong length: %w", b3.ErrMismatch)

// opened is the outcome of a part's request.
type opened struct {
	body io.ReadCloser
	err  error
}

// blockReader reads parts one after another, with the requests of up to
// Ahead-1 later parts in flight. Read is used by one goroutine at a time;
// Close may be called from another goroutine while a Read waits for bytes
// (store/blocks's stall watchdog does): it ends the Read. mu guards cur,
// next, started and err; a Read does not hold it while it waits for a
// body's bytes.
type blockReader struct {
	s      *Store
	ctx    context.Context
	cancel context.CancelFunc
	fresh  bool
	parts  []part

	mu      sync.Mutex
	cur     io.ReadCloser // the part being read; nil once all are read
	next    []chan opened // the requests of the parts after cur, in order
	started int           // parts whose request has started
	err     error
}

// fill starts the requests of the next parts, up to Ahead in flight.
// r.mu is held, or r is not shared yet.
func (r *blockReader) fill() {
	for len(r.next)+1 < Ahead && r.started < len(r.parts) {
		ch := make(chan opened, 1)
		p := r.parts[r.started]
		go func() {
			body, err := r.s.openPart(r.ctx, p, r.fresh)
			ch <- opened{body, err}
		}()
		r.next = append(r.next, ch)
		r.started++
	}
}

func (r *blockReader) Read(p []byte) (int, error) {
	for {
		r.mu.Lock()
		cur, err := r.cur, r.err
		r.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if cur == nil {
			return 0, io.EOF
		}
		n, err := cur.Read(p)
		r.mu.Lock()
		if r.cur != cur { // closed meanwhile
			err := r.err
			r.mu.Unlock()
			return n, err
		}
		if err == io.EOF {
			cur.Close()
			r.cur = nil
			if len(r.next) > 0 {
				// The wait is short once Close has canceled the requests.
				o := <-r.next[0]
				r.next = r.next[1:]
				r.cur, r.err = o.body, o.err
				if r.err == nil {
					r.fill()
				}
			}
			r.mu.Unlock()
			if n > 0 {
				return n, nil
			}
			continue
		}
		if err != nil {
			r.err = err
		}
		r.mu.Unlock()
		return n, err
	}
}

// Close ends the reader and the requests in flight; a Read waiting for
// bytes returns.
func (r *blockReader) Close() error {
	r.cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil {
		r.cur.Close()
		r.cur = nil
	}
	for _, ch := range r.next {
		go func() {
			if o := <-ch; o.body != nil {
				o.body.Close()
			}
		}()
	}
	r.next = nil
	if r.err == nil {
		r.err = errClosed
	}
	return nil
}

var errClosed = fmt.Errorf("httpstore: read of a closed reader")
