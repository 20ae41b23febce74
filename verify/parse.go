package verify

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// lineParser reads one canonical member line. Strings without escapes
// alias the line; escaped ones are decoded into scratch, which is sized
// for the whole line first so that it never moves while a line is parsed.
type lineParser struct {
	line    []byte
	pos     int
	scratch []byte
}

// errNotCanonical is the error of a line that is not the canonical
// encoding of a member.
type errNotCanonical struct{ at int }

func (e errNotCanonical) Error() string {
	return fmt.Sprintf("not a member in canonical form (at byte %d)", e.at+1)
}

// parse reads line (without its newline) into f.
func (p *lineParser) parse(line []byte, f *fields) error {
	p.line, p.pos = line, 0
	if cap(p.scratch) < len(line) {
		p.scratch = make([]byte, 0, 2*len(line))
	}
	p.scratch = p.scratch[:0]
	*f = fields{}
	if !p.member(f) || p.pos != len(line) {
		return errNotCanonical{p.pos}
	}
	if !utf8.Valid(line) {
		return errors.New("not valid UTF-8")
	}
	return nil
}

// member reads the keys in canonical order: cas, digest, id, path, s3
// {bucket, etag, key, versionId}, size, split. Optional fields that are
// present are never empty (AppendCanonical leaves empty ones out).
func (p *lineParser) member(f *fields) bool {
	ok := p.lit(`{`)
	if ok && p.lit(`"cas":`) {
		f.cas, ok = p.str()
		f.hasCAS = true
		ok = ok && len(f.cas) > 0 && p.lit(`,`)
	}
	ok = ok && p.lit(`"digest":`)
	if ok {
		f.digest, ok = p.str()
	}
	ok = ok && p.lit(`,"id":`)
	if ok {
		f.id, ok = p.str()
	}
	ok = ok && p.lit(`,"path":`)
	if ok {
		f.path, ok = p.str()
	}
	if ok && p.lit(`,"s3":{"bucket":`) {
		f.hasS3 = true
		f.bucket, ok = p.str()
		if ok && p.lit(`,"etag":`) {
			f.etag, ok = p.str()
			ok = ok && len(f.etag) > 0
		}
		ok = ok && p.lit(`,"key":`)
		if ok {
			f.key, ok = p.str()
		}
		ok = ok && p.lit(`,"versionId":`)
		if ok {
			f.versionID, ok = p.str()
		}
		ok = ok && p.lit(`}`)
	}
	ok = ok && p.lit(`,"size":`)
	if ok {
		f.size, ok = p.size()
	}
	if ok && p.lit(`,"split":`) {
		f.split, ok = p.str()
		ok = ok && len(f.split) > 0
	}
	return ok && p.lit(`}`)
}

// lit consumes s if the line continues with it.
func (p *lineParser) lit(s string) bool {
	if len(p.line)-p.pos >= len(s) && string(p.line[p.pos:p.pos+len(s)]) == s {
		p.pos += len(s)
		return true
	}
	return false
}

// str reads a string as JCS writes it and returns its value. Bytes from
// 0x80 up pass; the caller checks that the line is valid UTF-8.
func (p *lineParser) str() ([]byte, bool) {
	l, i := p.line, p.pos
	if i >= len(l) || l[i] != '"' {
		return nil, false
	}
	i++
	start := i
	for ; i < len(l); i++ {
		switch c := l[i]; {
		case c == '"':
			p.pos = i + 1
			return l[start:i], true
		case c == '\\':
			return p.escaped(start)
		case c < 0x20:
			p.pos = i
			return nil, false
		}
	}
	p.pos = i
	return nil, false
}

// escaped decodes the string that starts at l[start] and contains an
// escape. JCS escapes '"' and '\' as \" and \\, the control characters
// with a short form as \b \t \n \f \r, and the other control characters
// as \u00xx in lower case; it escapes nothing else.
func (p *lineParser) escaped(start int) ([]byte, bool) {
	l := p.line
	n0 := len(p.scratch)
	out := p.scratch[n0:n0:cap(p.scratch)] // appends stay within cap: never moves
	for i := start; i < len(l); {
		c := l[i]
		switch {
		case c == '"':
			p.scratch = p.scratch[:n0+len(out)]
			p.pos = i + 1
			return out, true
		case c < 0x20:
			p.pos = i
			return nil, false
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(l) {
			p.pos = i
			return nil, false
		}
		switch e := l[i+1]; e {
		case '"', '\\':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 't':
			out = append(out, '\t')
		case 'n':
			out = append(out, '\n')
		case 'f':
			out = append(out, '\f')
		case 'r':
			out = append(out, '\r')
		case 'u':
			v, ok := controlEscape(l[i:])
			if !ok {
				p.pos = i
				return nil, false
			}
			out = append(out, v)
			i += 6
			continue
		default:
			p.pos = i
			return nil, false
		}
		i += 2
	}
	p.pos = len(l)
	return nil, false
}

// controlEscape decodes a \u00xx escape at the start of b that JCS would
// write: a control character without a short form, in lower-case hex.
func controlEscape(b []byte) (byte, bool) {
	if len(b) < 6 || b[2] != '0' || b[3] != '0' || (b[4] != '0' && b[4] != '1') {
		return 0, false
	}
	lo := b[5]
	var v byte
	switch {
	case '0' <= lo && lo <= '9':
		v = lo - '0'
	case 'a' <= lo && lo <= 'f':
		v = lo - 'a' + 10
	default:
		return 0, false
	}
	v += (b[4] - '0') << 4
	switch v {
	case '\b', '\t', '\n', '\f', '\r':
		return 0, false
	}
	return v, true
}

// size reads a size as JCS writes an integer: no sign, no leading zero,
// no fraction or exponent, at most 2^53-1.
func (p *lineParser) size() (int64, bool) {
	l, i := p.line, p.pos
	if i < len(l) && l[i] == '0' {
		p.pos++
		return 0, true
	}
	var v int64
	j := i
	for ; j < len(l) && '0' <= l[j] && l[j] <= '9'; j++ {
		if j-i == 16 {
			return 0, false
		}
		v = v*10 + int64(l[j]-'0')
	}
	if j == i || v > maxSafeInt {
		return 0, false
	}
	p.pos = j
	return v, true
}
