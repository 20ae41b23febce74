package verify

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// ParseTable parses a member table into a Table. Every line must be
// exactly the canonical encoding of one member with no unknown field
// (what AppendCanonical writes for a member whose strings are valid UTF-8
// and whose size is in 0..2^53-1), lines end in "\n", and paths are
// strictly increasing in byte order. It does not check member semantics;
// CheckMembers does.
//
// The lines are read directly, without a general JSON decoder: canonical
// JSON has one spelling per member, so a strict scanner that accepts only
// that spelling (fixed key order, no white space, only the escapes JCS
// writes, integers without sign, fraction or exponent) accepts exactly the
// lines that re-encode to themselves. Tables are parsed in parallel
// chunks of about a MiB split at line boundaries.
func ParseTable(table []byte) (*Table, error) {
	p := newTableParser(bytes.Count(table, []byte{'\n'}))
	size := max(minChunk, len(table)/(maxArenas-1)+1)
	for len(table) > 0 {
		end := len(table)
		if size < end {
			if j := bytes.IndexByte(table[size:], '\n'); j >= 0 {
				end = size + j + 1
			}
		}
		p.send(table[:end], nil)
		table = table[end:]
	}
	return p.finish()
}

// parseTableFrom parses the member table that r yields, like ParseTable,
// reading it in chunks of about a MiB: the table's bytes are never held
// whole, only the chunks being parsed. Every byte read is written to h
// (which hashes it) before it is parsed. members is the number of members
// expected, a hint for the memory to reserve.
func parseTableFrom(r io.Reader, h io.Writer, members int) (*Table, error) {
	p := newTableParser(members)
	workers := runtime.GOMAXPROCS(0)
	free := make(chan []byte, workers+2) // buffers parsed, to be filled again
	made := 0
	buffer := func(need int) []byte {
		var b []byte
		select {
		case b = <-free:
		default:
			if made < cap(free) {
				made++
			} else {
				b = <-free
			}
		}
		if cap(b) < need {
			b = make([]byte, 0, need)
		}
		return b[:0]
	}
	release := func(b []byte) { free <- b[:0] }
	var carry []byte // the start of a line that did not end in the last buffer
	for {
		buf := append(buffer(max(minChunk, 2*len(carry))), carry...)
		n, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		h.Write(buf[len(carry):])
		eof := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !eof {
			p.finish()
			return nil, &readError{err}
		}
		cut := bytes.LastIndexByte(buf, '\n') + 1
		if eof {
			cut = len(buf)
		}
		carry = append(carry[:0], buf[cut:]...)
		if cut == 0 && !eof { // no line ends in buf: read on into a larger one
			release(buf)
			continue
		}
		if len(buf[:cut]) == 0 {
			release(buf)
			return p.finish()
		}
		if p.chunks() == maxArenas {
			p.finish()
			return nil, errors.New("member table too large")
		}
		p.send(buf[:cut], release)
		if eof {
			return p.finish()
		}
	}
}

// minChunk is the size of the chunks of a table that are parsed on their own.
var minChunk = 1 << 20

// tableParser parses chunks of a member table in parallel, in the order
// they are sent, into a Table.
type tableParser struct {
	t      *Table
	strs   *interner
	work   chan *chunk
	wg     sync.WaitGroup
	sent   []*chunk
	n      int          // lines in the chunks sent
	grow   sync.RWMutex // held to read t.recs by workers, to grow it by send
	failed atomic.Int64 // lowest index of a chunk that failed to parse
}

// chunk is a part of a member table that ends at the end of a line (or
// of the table).
type chunk struct {
	data        []byte
	release     func([]byte) // takes data back once parsed, or nil
	idx         int
	lines, base int // lines, and the index of the first member
	arena       string
	idsArePaths bool
	parsed      int    // members parsed
	first, last []byte // paths of the first and last member parsed
	err         error
	errLine     int // line of err within the chunk, from 1
}

// newTableParser starts a parser that reserves room for members members
// and grows when there are more.
func newTableParser(members int) *tableParser {
	p := &tableParser{
		t:    &Table{recs: make([]rec, max(members, 0)), sorted: true, idsArePaths: true},
		strs: newInterner(),
		work: make(chan *chunk, runtime.GOMAXPROCS(0)),
	}
	p.failed.Store(math.MaxInt64)
	for range runtime.GOMAXPROCS(0) {
		p.wg.Go(p.worker)
	}
	return p
}

func (p *tableParser) chunks() int { return len(p.sent) }

// send queues data, which ends at the end of a line or of the table, to
// be parsed after the chunks sent before it; release, if not nil, gets
// data back once it is parsed.
func (p *tableParser) send(data []byte, release func([]byte)) {
	c := &chunk{data: data, release: release, idx: len(p.sent), lines: bytes.Count(data, []byte{'\n'}), base: p.n}
	p.n += c.lines
	if p.n > len(p.t.recs) {
		p.grow.Lock()
		recs := make([]rec, max(p.n, 2*len(p.t.recs)))
		copy(recs, p.t.recs)
		p.t.recs = recs
		p.grow.Unlock()
	}
	p.sent = append(p.sent, c)
	p.work <- c
}

// worker parses chunks until the work ends. Strings are built in a
// scratch arena that is copied to its exact size once the chunk is done.
// A chunk after one that failed is not parsed: only the first error in
// table order is reported.
func (p *tableParser) worker() {
	var lp lineParser
	var scratch []byte
	local := map[string]uint16{}
	for c := range p.work {
		if int64(c.idx) < p.failed.Load() {
			p.grow.RLock()
			b := builder{recs: p.t.recs[c.base : c.base+c.lines], arena: scratch[:0], chunk: uint64(c.idx), strs: p.strs, local: local, idsArePaths: true}
			c.errLine, c.err = lp.chunk(c, &b)
			p.grow.RUnlock()
			c.arena, c.parsed, c.idsArePaths = string(b.arena), b.n, b.idsArePaths
			scratch = b.arena
			for c.err != nil {
				old := p.failed.Load()
				if old <= int64(c.idx) || p.failed.CompareAndSwap(old, int64(c.idx)) {
					break
				}
			}
		}
		if c.release != nil {
			c.release(c.data)
		}
		c.data = nil
	}
}

// finish waits for the chunks sent and returns the table, or the first
// error in table order: a line that does not parse, or a path not after
// the last path of the chunk before.
func (p *tableParser) finish() (*Table, error) {
	close(p.work)
	p.wg.Wait()
	t := p.t
	t.recs = t.recs[:p.n]
	t.arenas = make([]string, len(p.sent))
	line := 1
	var prev *chunk
	for i, c := range p.sent {
		if prev != nil && c.parsed > 0 && !(string(prev.last) < string(c.first)) {
			return nil, fmt.Errorf("member table line %d: path %q not after %q", line, c.first, prev.last)
		}
		if c.err != nil {
			return nil, fmt.Errorf("member table line %d: %v", line+c.errLine-1, c.err)
		}
		t.arenas[i] = c.arena
		t.idsArePaths = t.idsArePaths && c.idsArePaths
		line += c.lines
		prev = c
	}
	t.strs = p.strs.strs
	return t, nil
}

// chunk parses the lines of c into b.
func (p *lineParser) chunk(c *chunk, b *builder) (line int, err error) {
	data := c.data
	var f fields
	var prev []byte
	for line = 1; len(data) > 0; line++ {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return line, errors.New("no newline at end of table")
		}
		if err := p.parse(data[:i], &f); err != nil {
			return line, err
		}
		data = data[i+1:]
		if line > 1 && !(string(prev) < string(f.path)) {
			return line, fmt.Errorf("path %q not after %q", f.path, prev)
		}
		b.add(&f)
		prev = append(prev[:0], f.path...)
		if line == 1 {
			c.first = bytes.Clone(f.path)
		}
	}
	c.last = prev
	return 0, nil
}
