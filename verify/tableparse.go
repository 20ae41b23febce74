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
	t, _, err := parseTable(table, newMemSink(int64(bytes.Count(table, []byte{'\n'})), int64(len(table))), nil)
	return t, err
}

// parseTable is ParseTable into the sink s, with the member checks run as
// the table is parsed; h, when not nil, receives the counts for an index
// header.
func parseTable(table []byte, s sink, h *header) (*Table, []Problem, error) {
	p := newTableParser(s)
	size := max(minChunk, len(table)/maxChunks+1)
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
	return p.finish(h)
}

// maxChunks bounds the chunks of a table parsed in parallel.
const maxChunks = 1 << 16

// parseTableFrom parses the member table that r yields, like ParseTable,
// into the sink s, reading it in chunks of about a MiB: the table's bytes
// are never held whole, only the chunks being parsed, and a part of the
// Table is passed to s as soon as the parts before it are. Every byte
// read is written to h (which hashes it) before it is parsed.
func parseTableFrom(r io.Reader, h io.Writer, s sink, hd *header) (*Table, []Problem, error) {
	p := newTableParser(s)
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
			p.finish(nil)
			return nil, nil, &readError{err}
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
			return p.finish(hd)
		}
		p.send(buf[:cut], release)
		if eof {
			return p.finish(hd)
		}
	}
}

// minChunk is the size of the chunks of a table that are parsed on their own.
var minChunk = 1 << 20

// tableParser parses chunks of a member table in parallel and joins them
// in the order they are sent.
type tableParser struct {
	strs   *interner
	work   chan *chunk
	order  chan *chunk // the chunks sent, in order, for join
	wg     sync.WaitGroup
	joined chan struct{}
	a      *assembler
	sent   int
	failed atomic.Int64 // lowest index of a chunk that failed to parse

	// Set by join: the first error in table order and its line.
	err error
}

// chunk is a part of a member table that ends at the end of a line (or
// of the table).
type chunk struct {
	data    []byte
	release func([]byte) // takes data back once parsed, or nil
	idx     int
	lines   int
	part    part
	err     error
	errLine int // line of err within the chunk, from 1
	done    chan struct{}
}

func newTableParser(s sink) *tableParser {
	workers := runtime.GOMAXPROCS(0)
	a := newAssembler(s, true)
	a.checked = true
	p := &tableParser{
		strs:   newInterner(),
		work:   make(chan *chunk, workers),
		order:  make(chan *chunk, 2*workers),
		joined: make(chan struct{}),
		a:      a,
	}
	p.failed.Store(math.MaxInt64)
	for range workers {
		p.wg.Go(p.worker)
	}
	go p.join()
	return p
}

// send queues data, which ends at the end of a line or of the table, to
// be parsed and then joined after the chunks sent before it; release, if
// not nil, gets data back once it is parsed.
func (p *tableParser) send(data []byte, release func([]byte)) {
	c := &chunk{data: data, release: release, idx: p.sent, lines: bytes.Count(data, []byte{'\n'}), done: make(chan struct{})}
	p.sent++
	p.order <- c
	p.work <- c
}

// worker parses chunks until the work ends. A chunk after one that
// failed is not parsed: only the first error in table order is reported.
func (p *tableParser) worker() {
	var lp lineParser
	for c := range p.work {
		if int64(c.idx) < p.failed.Load() {
			b := newBuilder(p.strs)
			b.reserve(c.lines, len(c.data))
			b.check = true
			c.errLine, c.err = lp.chunk(c, b)
			c.part = b.part
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
		close(c.done)
	}
}

// join hands the parsed chunks to the assembler in order, until the first
// that failed: a line that does not parse, or a path not after the last
// path of the chunk before.
func (p *tableParser) join() {
	defer close(p.joined)
	line := 1
	// last is the last path joined, once seen is set: the empty path
	// leaves last nil, and must still be followed by a greater one.
	var last []byte
	seen := false
	for c := range p.order {
		<-c.done
		if p.err == nil {
			switch {
			case c.part.n > 0 && seen && !(string(last) < string(firstPath(&c.part))):
				p.err = fmt.Errorf("member table line %d: path %q not after %q", line, firstPath(&c.part), last)
			case c.err != nil:
				p.err = fmt.Errorf("member table line %d: %v", line+c.errLine-1, c.err)
			default:
				if c.part.n > 0 {
					last, seen = append(last[:0], lastPath(&c.part)...), true
				}
				p.a.part(&c.part)
			}
		}
		c.part = part{}
		line += c.lines
	}
}

// firstPath and lastPath return the paths of the first and last member of a part.
func firstPath(p *part) []byte {
	if p.n == 1 {
		return p.b[secNames]
	}
	return p.b[secNames][:le.Uint64(p.b[secWalk][walkSize+8:])]
}

func lastPath(p *part) []byte {
	return p.b[secNames][le.Uint64(p.b[secWalk][(p.n-1)*walkSize+8:]):]
}

// finish waits for the chunks sent and returns the table and its
// problems, or the first error in table order.
func (p *tableParser) finish(h *header) (*Table, []Problem, error) {
	close(p.work)
	close(p.order)
	p.wg.Wait()
	<-p.joined
	if p.err != nil {
		return nil, nil, p.err
	}
	return p.a.finish(p.strs.strs, h)
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
	}
	return 0, nil
}
