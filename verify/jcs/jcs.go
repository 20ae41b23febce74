// Package jcs implements the JSON Canonicalization Scheme of RFC 8785.
//
// Canonical form: no insignificant white space; object members sorted by the
// UTF-16 code units of their names; strings with only the mandatory escapes
// (", \, and control characters, the short forms \b \t \n \f \r where they
// exist, otherwise \u00xx in lower case); numbers as ECMAScript's
// Number.prototype.toString prints the IEEE-754 double. Input must be I-JSON
// (RFC 7493): valid UTF-8, no duplicate member names, numbers that are finite
// doubles. pinfs digests the canonical bytes, so two implementations that
// follow this package agree on every digest.
package jcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Canonicalize returns the RFC 8785 canonical form of the JSON text in.
// It fails on invalid JSON, invalid UTF-8, duplicate member names, numbers
// that are not finite doubles, and trailing data.
func Canonicalize(in []byte) ([]byte, error) {
	if !utf8.Valid(in) {
		return nil, errors.New("jcs: invalid UTF-8")
	}
	if err := checkSurrogates(in); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	var buf bytes.Buffer
	if err := value(dec, &buf); err != nil {
		return nil, err
	}
	// Only white space may follow: Token reports io.EOF for that, and a
	// value or a syntax error for anything else.
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("jcs: trailing data after JSON value")
	}
	return buf.Bytes(), nil
}

// checkSurrogates refuses \u escapes that encode a lone UTF-16 surrogate.
// I-JSON forbids them, and encoding/json would silently turn each into
// U+FFFD, so that different inputs would get the same canonical form.
// Outside strings a backslash is a syntax error the decoder reports.
func checkSurrogates(in []byte) error {
	for i := 0; i < len(in); i++ {
		if in[i] != '\\' {
			continue
		}
		r, ok := escapedRune(in[i:])
		if !ok {
			i++ // skip the escaped character, which may be a backslash
			continue
		}
		if utf16.IsSurrogate(r) {
			r2, ok := escapedRune(in[i+6:])
			if !ok || r >= 0xdc00 || r2 < 0xdc00 || r2 > 0xdfff {
				return fmt.Errorf("jcs: lone surrogate %q", in[i:i+6])
			}
			i += 6
		}
		i += 5
	}
	return nil
}

// escapedRune decodes a \uXXXX escape at the start of b.
func escapedRune(b []byte) (rune, bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	r, err := strconv.ParseUint(string(b[2:6]), 16, 16)
	return rune(r), err == nil
}

// Marshal encodes v with encoding/json and returns its canonical form.
func Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Canonicalize(b)
}

// value writes the canonical form of the next JSON value of dec to buf.
func value(dec *json.Decoder, buf *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("jcs: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			return array(dec, buf)
		}
		if t == '{' {
			return object(dec, buf)
		}
		return fmt.Errorf("jcs: unexpected %q", t)
	case string:
		writeString(buf, t)
	case json.Number:
		s, err := Number(string(t))
		if err != nil {
			return err
		}
		buf.WriteString(s)
	case bool:
		buf.WriteString(strconv.FormatBool(t))
	case nil:
		buf.WriteString("null")
	}
	return nil
}

func array(dec *json.Decoder, buf *bytes.Buffer) error {
	buf.WriteByte('[')
	for i := 0; dec.More(); i++ {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := value(dec, buf); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // ']'
		return fmt.Errorf("jcs: %w", err)
	}
	buf.WriteByte(']')
	return nil
}

type member struct {
	name  string
	key   []uint16
	value []byte
}

func object(dec *json.Decoder, buf *bytes.Buffer) error {
	var members []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("jcs: %w", err)
		}
		name, ok := tok.(string)
		if !ok {
			return fmt.Errorf("jcs: object key is %T, not a string", tok)
		}
		if seen[name] {
			return fmt.Errorf("jcs: duplicate member name %q", name)
		}
		seen[name] = true
		var v bytes.Buffer
		if err := value(dec, &v); err != nil {
			return err
		}
		members = append(members, member{name, utf16.Encode([]rune(name)), v.Bytes()})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return fmt.Errorf("jcs: %w", err)
	}
	sort.Slice(members, func(i, j int) bool { return less16(members[i].key, members[j].key) })
	buf.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			buf.WriteByte(',')
		}
		writeString(buf, m.name)
		buf.WriteByte(':')
		buf.Write(m.value)
	}
	buf.WriteByte('}')
	return nil
}

func less16(a, b []uint16) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}

const hexdigits = "0123456789abcdef"

// writeString writes s as a canonical JSON string.
func writeString(buf *bytes.Buffer, s string) {
	buf.Write(AppendString(buf.AvailableBuffer(), s))
}

// AppendString appends s to b as a canonical JSON string. s must be valid
// UTF-8; callers that build canonical JSON by hand check that first.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\b':
			b = append(b, `\b`...)
		case c == '\t':
			b = append(b, `\t`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '\f':
			b = append(b, `\f`...)
		case c == '\r':
			b = append(b, `\r`...)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexdigits[c>>4], hexdigits[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// Number returns the canonical form of the JSON number literal lit: the
// shortest decimal that round-trips the double, laid out as ECMAScript does
// (plain notation for exponents -7 < e < 21, otherwise d.ddde±x).
func Number(lit string) (string, error) {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", fmt.Errorf("jcs: number %s is not a finite IEEE-754 double", lit)
	}
	return FormatFloat(f), nil
}

// FormatFloat formats f as ECMAScript's Number.prototype.toString does.
func FormatFloat(f float64) string {
	if f == 0 {
		return "0" // also for -0
	}
	neg := f < 0
	if neg {
		f = -f
	}
	// Shortest round-trip digits and decimal exponent: d.ddde±x.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expStr)
	n := exp + 1 // position of the decimal point relative to digits
	k := len(digits)
	var out string
	switch {
	case k <= n && n <= 21:
		out = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		out = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		out = "0." + strings.Repeat("0", -n) + digits
	default:
		sign := "+"
		if n-1 < 0 {
			sign = "-"
		}
		x := n - 1
		if x < 0 {
			x = -x
		}
		out = digits[:1]
		if k > 1 {
			out += "." + digits[1:]
		}
		out += "e" + sign + strconv.Itoa(x)
	}
	if neg {
		return "-" + out
	}
	return out
}
