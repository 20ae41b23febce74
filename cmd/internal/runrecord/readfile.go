package runrecord

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/pinfs/pinfs/store"
)

// payloadMarks are where an event line's payload starts: Members, Set and
// Passthrough are Event's last fields, and a JSON string cannot hold these
// bytes.
var payloadMarks = [...][]byte{[]byte(`,"members":`), []byte(`,"set":`), []byte(`,"passthrough":`)}

const maxMarkLen = len(`,"passthrough":`)

// lineScanner reads the lines of a JSON Lines file of any length through
// one reusable buffer, which holds at most max bytes of a line (what is
// cut off a line does not count).
type lineScanner struct {
	br  *bufio.Reader
	buf []byte
	max int
}

func newLineScanner(r io.Reader) *lineScanner {
	return &lineScanner{br: bufio.NewReaderSize(r, 1<<20), max: maxLine}
}

// maxLine is the most bytes of a record line that are read: a line is an
// event, a record (store.MaxRecord). Tests lower it.
var maxLine = store.MaxRecord

// next returns the next line without its newline; it is valid until the
// next call, and err is io.EOF after the last line. A line of more than
// s.max bytes (before its cut) is an error wrapping store.ErrTooLarge. With cut, a line is
// cut before its payload (see payloadMarks) and closed with '}', so that
// only its other fields are kept and decoded; the payload is skipped
// without being kept, and ok is false when it does not end the line as a
// whole event does (in '}'): a line torn in its payload.
func (s *lineScanner) next(cut bool) (line []byte, ok bool, err error) {
	s.buf = s.buf[:0]
	cutAt, last, got := -1, byte(0), false
	for {
		chunk, rerr := s.br.ReadSlice('\n')
		got = got || len(chunk) > 0
		body := bytes.TrimSuffix(chunk, []byte{'\n'})
		if len(body) > 0 {
			last = body[len(body)-1]
		}
		if cutAt < 0 {
			from := max(0, len(s.buf)-maxMarkLen+1)
			s.buf = append(s.buf, body...) // at most one buffer's worth beyond s.max
			if cut {
				cutAt = firstMark(s.buf, from)
			}
			if cutAt >= 0 {
				s.buf = s.buf[:cutAt]
			}
			if len(s.buf) > s.max {
				return nil, false, fmt.Errorf("a line: %w", store.TooLarge("", int64(s.max)))
			}
		}
		switch {
		case rerr == nil:
		case errors.Is(rerr, bufio.ErrBufferFull):
			continue
		case rerr == io.EOF && got:
		default:
			return nil, false, rerr
		}
		break
	}
	if cutAt < 0 {
		return s.buf, true, nil
	}
	s.buf = append(s.buf, '}')
	return s.buf, last == '}', nil
}

// firstMark returns the index of the first payload mark in b at or after
// from, or -1.
func firstMark(b []byte, from int) int {
	at := -1
	for _, m := range payloadMarks {
		if i := bytes.Index(b[from:], m); i >= 0 && (at < 0 || from+i < at) {
			at = from + i
		}
	}
	return at
}

// runIDField is how an event line names its run: `"run_id":"`, then the id.
var runIDField = []byte(`"run_id":"`)

// scanFile calls fn with each non-empty line of the record file p (cut
// before its payload when cut is set; see lineScanner.next) until fn
// returns an error.
func scanFile(ctx context.Context, p string, cut bool, fn func(line []byte, ok bool) error) error {
	f, err := openFile(p, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("runrecord: %w", err)
	}
	defer f.Close()
	sc := newLineScanner(f)
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		line, ok, err := sc.next(cut)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("runrecord: read %s: %w", p, err)
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			if err := fn(line, ok); err != nil {
				return err
			}
		}
	}
}

// readRunFile adds the events of run runID in the record file p to c (only
// the consumed ones with consumedOnly), counting in c.run.Torn the lines
// that do not parse and name the run or no run, and reports whether the
// file holds any event of the run.
func readRunFile(ctx context.Context, p, runID string, consumedOnly bool, c *collector) (found bool, err error) {
	quoted := append(bytes.Clone(runIDField), runID+`"`...)
	err = scanFile(ctx, p, false, func(line []byte, _ bool) error {
		mine := bytes.Contains(line, quoted)
		if !mine && bytes.Contains(line, runIDField) {
			return nil // another run's
		}
		e, ok := parseLine(line)
		switch {
		case !ok:
			c.run.Torn++
		case e.RunID == runID:
			found = true
			if !consumedOnly || e.Event == ConsumedSet {
				c.add(eventKey(&e, append(line[:len(line):len(line)], '\n')), e)
			}
		}
		return nil
	})
	return found, err
}
